"""The former home of ``qk_sniffer`` (qk-sniffer's capture options, plans, recorder and sinks),
``profile`` (profile_model, profile_vectors, ModelProfile) and ``interop`` (the toolkit
adapters): every name they had here still works."""

from . import capture as _capture  # noqa: F401
from .interop import _pattern_misfit, from_activation_cache, from_nnsight_inputs  # noqa: F401
from .profile import *  # noqa: F401,F403
from .profile import (_capture_options, _early_bucket_shortfall, _memory_reader,  # noqa: F401
                      _pad_id, _split_options, _token_examples)
from .qk_sniffer import *  # noqa: F401,F403
