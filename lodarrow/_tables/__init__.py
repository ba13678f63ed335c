"""Operators on the columns of tables, files and datasets (docs/tables.md, docs/scale-out.md).

- ``_adapters``: Arrow, pandas and polars tables read as Arrow columns and written back
  (a table row is a top-level sequence);
- ``_apply``: ``col`` references and ``apply``, the generic engine that runs any operator on
  columns from the operator's own table form (``lodarrow._ops._contract``);
- ``_udf``: ``udf`` and ``pipeline``, picklable for Ray, Dask and Spark workers;
- ``_table``: ``to_table`` / ``from_table``; ``_parquet``: ``read_parquet``, ``iter_parquet``,
  ``write_parquet``; ``_dataset``: ``map_parquet``; ``_spark``: ``spark_map``;
- ``_sources``: the one resolver of Parquet sources (files, directories, globs, lists, on any
  filesystem); ``_filesystems``: URIs, pyarrow / fsspec filesystems, footers and errors naming
  the file; ``_lengths_store``: the lengths cache and the lengths recorded in each
  file's footer (``_footer``: the footer edit).
"""
