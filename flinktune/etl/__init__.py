"""The metric ETL on Spark: a session factory (:mod:`flinktune.etl.spark`), the raw -> ``features_10s`` /
``features_1m`` transform (:mod:`flinktune.etl.features`), the stage-then-commit writer of curated partitions
(:mod:`flinktune.etl.curated`) and the contract checks the jobs call (:mod:`flinktune.etl.observations`).

Import the submodules directly; this package imports nothing at load time so that DAG parsing stays
cheap (pyspark is heavy).
"""

__all__: list[str] = []
