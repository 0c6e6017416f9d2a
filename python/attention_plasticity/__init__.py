"""attention_plasticity: measure whether attention heads choose keys by content or by position.

The Python package is being built; for now it holds ``attention_plasticity.sniffed``, the
reader of qk-sniffer's Parquet dumps (numpy + pyarrow).
"""
