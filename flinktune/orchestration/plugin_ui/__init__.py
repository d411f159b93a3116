"""The Airflow plugin's pages (``plugins/flinktune_plugin.py`` serves them), read-only.

- :mod:`~flinktune.orchestration.plugin_ui.overview`: what one job's page shows (configuration in
  force, recent decisions, champions, latest report).
- :mod:`~flinktune.orchestration.plugin_ui.overview_html`: the HTML of the index and the job pages.
"""

__all__: list[str] = []
