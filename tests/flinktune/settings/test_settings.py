"""Typed settings groups: defaults, one-line errors naming the variable, the unknown-variable warning,
and that every FLINKTUNE_* variable is read through flinktune.settings (or pricing) only."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from flinktune import settings as st
from flinktune.settings import (
    BackendSettings,
    KubernetesSettings,
    LocalFlinkSettings,
    MLflowSettings,
    ProfilingSettings,
    PrometheusSettings,
    SettingsError,
    SparkSettings,
    TrainerSettings,
    check_environment,
    known_variables,
    load_settings,
    read_group,
)

REPO = Path(__file__).resolve().parents[3]


def test_each_group_has_its_documented_defaults_from_an_empty_environment() -> None:
    assert read_group(BackendSettings, {}).model_dump() == {"cluster": "twin", "training": "in_process", "spark_submit": ""}
    k8s = read_group(KubernetesSettings, {})
    assert (k8s.namespace, k8s.vertex_ids, k8s.crd_dir, k8s.home_namespace) == ("", {}, None, "flinktune")
    spark = read_group(SparkSettings, {})
    assert (spark.conf, spark.image, spark.service_account) == ({}, "", "flinktune-spark")
    t = read_group(TrainerSettings, {})
    assert (t.image, t.gpus, t.cpu, t.memory, t.var_pvc, t.secret_refs) == ("", 1, "2", "8Gi", "flinktune-var", {})
    assert t.node_selector == {"nvidia.com/gpu.present": "true"} and t.tolerations[0]["key"] == "nvidia.com/gpu"
    assert read_group(ProfilingSettings, {}).model_dump() == {"cpu": 50.0, "memory_mb": 430000}
    assert read_group(MLflowSettings, {}).ui_url == "http://127.0.0.1:5000"
    assert read_group(LocalFlinkSettings, {}).model_dump() == {"home": None, "venv": None, "jobs_dir": None}
    assert read_group(PrometheusSettings, {}).url == ""


@pytest.mark.parametrize("group", st.settings_groups(), ids=lambda g: g.__name__)
def test_every_field_has_a_description(group: type) -> None:
    assert all(info.description for info in group.model_fields.values()), group.__name__


def test_values_are_parsed_with_their_types_and_json_and_blank_means_unset() -> None:
    env = {
        "FLINKTUNE_CLUSTER": " Kubernetes ",
        "FLINKTUNE_VERTEX_IDS": '{"source": "abc"}',
        "FLINKTUNE_K8S_NAMESPACE": "flink",
        "FLINKTUNE_SPARK_CONF": '{"spark.executor.instances": 3, "spark.ui.enabled": true}',
        "FLINKTUNE_TRAINER_GPUS": "",
    }
    assert read_group(BackendSettings, env).cluster == "kubernetes"
    assert read_group(KubernetesSettings, env).vertex_ids == {"source": "abc"}
    assert read_group(SparkSettings, env).properties() == {"spark.executor.instances": "3", "spark.ui.enabled": "true"}
    assert read_group(TrainerSettings, env).gpus == 1


@pytest.mark.parametrize(
    ("group", "env", "message"),
    [
        (BackendSettings, {"FLINKTUNE_CLUSTER": "k8s"}, "FLINKTUNE_CLUSTER='k8s': must be 'twin', 'kubernetes' or 'local-flink'"),
        (KubernetesSettings, {"FLINKTUNE_VERTEX_IDS": "{oops"}, "FLINKTUNE_VERTEX_IDS='{oops': not valid JSON"),
        (SparkSettings, {"FLINKTUNE_SPARK_CONF": "[1]"}, "FLINKTUNE_SPARK_CONF='[1]': must be a JSON object, got list"),
        (
            TrainerSettings,
            {"FLINKTUNE_TRAINER_GPUS": "-1"},
            "FLINKTUNE_TRAINER_GPUS='-1': Input should be greater than or equal to 0",
        ),
        (ProfilingSettings, {"FLINKTUNE_PROFILE_BUDGET_MEMORY_MB": "lots"}, "FLINKTUNE_PROFILE_BUDGET_MEMORY_MB='lots'"),
        (MLflowSettings, {"FLINKTUNE_MLFLOW_UI_URL": "mlflow:5000"}, "FLINKTUNE_MLFLOW_UI_URL='mlflow:5000': must be an http(s)"),
        (PrometheusSettings, {"FLINKTUNE_PROMETHEUS_URL": "prom:9090"}, "FLINKTUNE_PROMETHEUS_URL: must be an http(s)"),
        # LocalFlinkSettings holds two optional paths: any text is a path; the distribution check names them.
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_a_bad_value_is_one_line_naming_the_variable(group: type, env: dict, message: str) -> None:
    with pytest.raises(SettingsError) as err:
        read_group(group, env)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_start_up_validates_every_group_and_names_the_bad_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLINKTUNE_TRAINER_TOLERATIONS", '{"key": "x"}')
    with pytest.raises(
        SettingsError, match=r"^FLINKTUNE_TRAINER_TOLERATIONS='\{\"key\": \"x\"\}': must be a JSON list, got dict$"
    ):
        load_settings(var_dir=tmp_path)
    monkeypatch.delenv("FLINKTUNE_TRAINER_TOLERATIONS")
    monkeypatch.setenv("FLINKTUNE_TIMEOUT_MLFLOW_RETRIES", "many")
    with pytest.raises(
        SettingsError,
        match=r"^FLINKTUNE_TIMEOUT_MLFLOW_RETRIES \(settings field mlflow_retries\): Input should be a valid integer",
    ):
        load_settings(var_dir=tmp_path)


def test_a_secret_is_never_shown_in_an_error() -> None:
    env = {"FLINKTUNE_PROMETHEUS_PASSWORD": "hunter2", "FLINKTUNE_PROMETHEUS_USER": "u"}
    s = read_group(PrometheusSettings, env)
    assert "hunter2" not in repr(s) and s.password is not None and s.password.get_secret_value() == "hunter2"


def test_an_unknown_variable_is_warned_about_once_with_the_closest_valid_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(st, "_warned", set())
    env = {"FLINKTUNE_LATENCY_TARGET": "900", "FLINKTUNE_TRAINER_GPU": "2", "FLINKTUNE_ZZZ": "1", "FLINKTUNE_CLUSTER": "twin"}
    with caplog.at_level(logging.WARNING, logger="flinktune.settings"):
        first = check_environment(env)
        again = check_environment(env)
    assert first == [
        "unknown environment variable FLINKTUNE_LATENCY_TARGET is ignored; did you mean FLINKTUNE_LATENCY_TARGET_MS?",
        "unknown environment variable FLINKTUNE_TRAINER_GPU is ignored; did you mean FLINKTUNE_TRAINER_GPUS?",
        "unknown environment variable FLINKTUNE_ZZZ is ignored",
    ]
    assert again == [] and [r.getMessage() for r in caplog.records] == first


# A direct read: .get("FLINKTUNE_..."), getenv(...), a subscript that is not assigned to (a pod's or
# a child's environment being written is fine), or a prefix glued to a name.
_DIRECT_READ = re.compile(r"""(\.get|getenv)\(\s*f?["']FLINKTUNE_|\[\s*f?["']FLINKTUNE_\w*["']\](?!\s*=[^=])|ENV_PREFIX\s*\+""")
_ALLOWED = {"flinktune/settings/__init__.py", "flinktune/settings/groups.py", "flinktune/pricing.py"}


def test_no_module_outside_settings_reads_a_flinktune_variable_directly() -> None:
    offenders = []
    for folder in ("flinktune", "jobs", "models", "plugins", "dags"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if rel not in _ALLOWED and _DIRECT_READ.search(line):
                    offenders.append(f"{rel}:{n}: {line.strip()}")
    assert offenders == []


def test_every_variable_the_code_and_docs_name_is_declared() -> None:
    # FLINKTUNE_STARTUP_RUNS is a Python constant of the replay, not an environment variable;
    # FLINKTUNE_LATENCY_TARGET is the docs' example of a misspelt name.
    named: set[str] = set()
    files = [p for f in ("flinktune", "jobs", "models", "plugins", "dags") for p in (REPO / f).rglob("*.py")]
    files += [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "docker").rglob("*.yaml")]
    files += [*(REPO / "docker").glob("Dockerfile.*")]
    for path in files:
        named |= set(re.findall(r"FLINKTUNE_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    prefixes = ("FLINKTUNE_PRICE", "FLINKTUNE_GOAL", "FLINKTUNE_TIMEOUT", "FLINKTUNE_PROMETHEUS", "FLINKTUNE_TRAINER")
    unknown = sorted(named - set(known_variables()) - {"FLINKTUNE_STARTUP_RUNS", "FLINKTUNE_LATENCY_TARGET", *prefixes})
    assert unknown == []


def test_the_settings_reference_in_the_docs_is_the_generated_table() -> None:
    assert (REPO / "docs" / "SETTINGS.md").read_text().endswith(st.variables_markdown())
