"""A file-backed GX project where the contracts run as Checkpoints and publish Data Docs.

Use :class:`GxProject` when validation must leave something a person can open: each dataset gets
a saved suite, a validation definition (its pandas dataframe asset, whole-frame batch) and a
Checkpoint with an :class:`~great_expectations.checkpoint.UpdateDataDocsAction`, so every run
stores its validation result under ``<root>/gx/uncommitted/validations/`` and refreshes the local
Data Docs site (``<root>/gx/uncommitted/data_docs/local_site/index.html`` and one page per
validation). :func:`data_contracts.validate.validate` uses it when given ``gx_project=``; without
one it validates in the process's ephemeral context and writes nothing.

Contexts are cached per project folder in the process (creating one costs ~50 ms, importing GX
~5 s once). Runs against one folder are serialised with an exclusive file lock, because two
processes (two Airflow tasks) writing the same suite file or rebuilding the same Data Docs index
at once could leave either half-written.
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DATA_SOURCE", "CheckpointRun", "GxProject"]

#: The project's one data source: batches arrive as in-memory pandas frames (a Spark batch's
#: GX run is on its first rows as pandas; see :mod:`data_contracts.validate`).
DATA_SOURCE = "contracts"

_lock = threading.Lock()
_contexts: dict[Path, Any] = {}


@dataclass(frozen=True)
class CheckpointRun:
    """What one Checkpoint run left: the GX validation result and its Data Docs page (None if not built)."""

    result: Any
    data_docs_page: Path | None


class GxProject:
    """One GX project folder (``<root>/gx``): suites, validation definitions, checkpoints, results, Data Docs."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    @property
    def data_docs_index(self) -> Path:
        """The Data Docs site's front page (exists once a checkpoint has run)."""
        return self.root / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"

    def context(self) -> Any:
        """The project's file-backed GX context (created with its folder on first use, progress bars off)."""
        with _lock:
            ctx = _contexts.get(self.root)
            if ctx is None:
                import great_expectations as gx
                from great_expectations.data_context.types.base import ProgressBarsConfig

                self.root.mkdir(parents=True, exist_ok=True)
                with self._file_lock():
                    ctx = gx.get_context(mode="file", project_root_dir=str(self.root))
                ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
                _contexts[self.root] = ctx
            return ctx

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        with open(self.root / ".lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _batch_definition(self, ctx: Any, dataset: str) -> Any:
        try:
            source = ctx.data_sources.get(DATA_SOURCE)
        except KeyError:
            source = ctx.data_sources.add_pandas(DATA_SOURCE)
        try:
            asset = source.get_asset(dataset)
        except LookupError:
            asset = source.add_dataframe_asset(dataset)
        try:
            return asset.get_batch_definition("whole")
        except KeyError:
            return asset.add_batch_definition_whole_dataframe("whole")

    def run_checkpoint(self, df: Any, suite: Any, *, dataset: str, batch_id: str, result_format: dict[str, Any]) -> CheckpointRun:
        """Validate the pandas frame ``df`` with ``suite`` through the dataset's Checkpoint (run name: ``batch_id``).

        The suite, validation definition and Checkpoint are saved under the dataset's name
        (updated on every run: a suite's freshness bound moves with ``now``).
        """
        import great_expectations as gx
        from great_expectations.checkpoint import UpdateDataDocsAction
        from great_expectations.core.run_identifier import RunIdentifier

        ctx = self.context()
        with _lock, self._file_lock():
            batch_definition = self._batch_definition(ctx, dataset)
            # Replaced, not add_or_update: that compares the stored suite expectation by expectation
            # and rewrites it once per change (seconds for a 40-rule contract); a replace is 3 small files.
            checkpoint_name = f"{dataset}_checkpoint"
            for store, name in (
                (ctx.checkpoints, checkpoint_name),
                (ctx.validation_definitions, dataset),
                (ctx.suites, suite.name),
            ):
                _delete_if_there(store, name)
            suite = ctx.suites.add(suite)
            definition = ctx.validation_definitions.add(gx.ValidationDefinition(name=dataset, data=batch_definition, suite=suite))
            checkpoint = ctx.checkpoints.add(
                gx.Checkpoint(
                    name=checkpoint_name,
                    validation_definitions=[definition],
                    actions=[UpdateDataDocsAction(name="update_data_docs")],
                    result_format=result_format,
                )
            )
            run = checkpoint.run(batch_parameters={"dataframe": df}, run_id=RunIdentifier(run_name=batch_id))
            (identifier, result), *_ = run.run_results.items()
            page = None
            for site in ctx.get_docs_sites_urls(resource_identifier=identifier):
                url = site.get("site_url") or ""
                if url.startswith("file://"):
                    page = Path(url[len("file://") :])
        return CheckpointRun(result=result, data_docs_page=page)


def _delete_if_there(store: Any, name: str) -> None:
    from great_expectations.exceptions import DataContextError

    try:
        store.get(name)
    except DataContextError:
        return  # nothing saved under this name yet
    store.delete(name)
