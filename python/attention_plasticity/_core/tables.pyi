"""
The tables of docs/method.md §3: their files, their columns' schema from the C++ CSV writer, and
head results as columns of NumPy arrays.
"""

from collections.abc import Iterable


def result_tables() -> list:
    """
    The CSVs of docs/method.md §3 as ap_analyze writes them: a list of (table name, file name, header).
    """

def result_schema() -> dict:
    """
    The columns of each table of docs/method.md §3 as ap_analyze writes them: {table name: [(column,
    'int64', 'float64' or 'str')]}, from the C++ CSV writer's own definition (include/attention_plasticity/io/csv_rows.hpp).
    """

def result_columns(results: Iterable) -> dict:
    """
    The rows of the head results `results` (HeadResult, in the order given) in every table of
    docs/method.md §3, as columns: {table name: {column: NumPy array}} (float64 or int64, the very
    numbers the CSV writer formats). attention_plasticity.tables() makes DataFrames of them.
    """
