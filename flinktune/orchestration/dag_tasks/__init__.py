"""What the DAG tasks run: the task bodies, the DAG files' shared wiring and the production submitters.

Import from the submodules (this package imports nothing, so loading one never loads Airflow):

- :mod:`~flinktune.orchestration.dag_tasks.tasks`: the task bodies the DAGs call, behind the back-end
  switches (:mod:`flinktune.backends.choice`; the realizer from :mod:`flinktune.backends.cluster`).
- :mod:`~flinktune.orchestration.dag_tasks.dag_wiring`: assets, typed params and default args shared
  by ``dags/`` (imports the Airflow task SDK: DAG files only).
- :mod:`~flinktune.orchestration.dag_tasks.triggers`: what a run may do given how it was started
  (unknown conf keys, ``dry_run`` per run type, the job an asset-triggered run acts on).
- :mod:`~flinktune.orchestration.dag_tasks.trainer_pod`, :mod:`~flinktune.orchestration.dag_tasks.spark_application`:
  the specs of production training (a GPU pod) and ETL (a SparkApplication) on Kubernetes, which
  :mod:`~flinktune.orchestration.dag_tasks.k8s_operators` runs with the cncf.kubernetes provider's
  ``KubernetesPodOperator`` and ``SparkKubernetesOperator`` (imports the provider: DAG files only,
  under those back ends).
- :mod:`~flinktune.orchestration.dag_tasks.spark_submit`: the ETL through ``spark-submit`` to a standalone cluster.
- :mod:`~flinktune.orchestration.dag_tasks.worker_preload`: what a Celery worker imports once, before it forks
  its task processes (its Celery ``imports``; loads Great Expectations, MLflow and the decision loop).
"""

__all__: list[str] = []
