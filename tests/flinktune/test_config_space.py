import pytest
import yaml

from flinktune.config_space import ConfigError, ConfigSpace, Configuration, default_space


def test_default_space_has_demeters_840_candidates_and_81_footprints():
    cands = default_space().candidates()
    assert len(cands) == 840
    assert len({(c.total_cpu, c.total_memory_mb) for c in cands}) == 81
    assert all(c.parallelism % c.task_slots == 0 for c in cands)


def test_maximum_is_24_single_slot_tms_with_one_core_and_4_gib():
    mx = default_space().maximum
    assert (mx.parallelism, mx.task_slots, mx.cpu, mx.memory_mb) == (24, 1, 1.0, 4096)
    assert (mx.taskmanagers, mx.total_cpu, mx.total_memory_mb) == (24, 24.0, 98304)


def test_cost_follows_taskmanagers():
    c = Configuration(12, 3, 2.0, 2048, 30)
    assert c.taskmanagers == 4 and c.total_cpu == 8.0 and c.total_memory_mb == 8192
    assert Configuration(10, 4, 1.0, 1024, 10).taskmanagers == 3  # ceil


@pytest.mark.parametrize(
    "field,value", [("parallelism", 0), ("task_slots", 0), ("cpu", 0.0), ("memory_mb", 10), ("checkpoint_interval_s", 0)]
)
def test_impossible_configuration_names_the_field(field, value):
    kw = dict(parallelism=8, task_slots=1, cpu=1.0, memory_mb=1024, checkpoint_interval_s=10)
    kw[field] = value
    with pytest.raises(ConfigError, match=field):
        Configuration(**kw)


def test_from_dict_round_trip_and_unknown_key():
    c = Configuration(16, 2, 2.0, 2048, 30).with_(vertex_parallelism={"Window": 12})
    assert Configuration.from_dict(c.to_dict()) == c
    with pytest.raises(ConfigError, match=r"unknown key.*'slots'"):
        Configuration.from_dict({"parallelism": 8, "slots": 1}, where="x.yaml")
    with pytest.raises(ConfigError, match="missing key"):
        Configuration.from_dict({"parallelism": 8})


def test_contains_and_normalise():
    space = default_space()
    assert space.contains(space.maximum)
    assert not space.contains(Configuration(10, 1, 1.0, 1024, 10))
    assert not space.contains(Configuration(24, 1, 3.0, 4096, 10))  # over the CPU budget
    assert space.normalise(space.maximum) == [1.0, 0.0, 0.0, 1.0, 0.0]


def test_space_from_yaml_rejects_unknown_keys_and_bad_values(tmp_path):
    p = tmp_path / "space.yaml"
    p.write_text(yaml.safe_dump({"parallelism": [4, 8], "cpu": [1, 2]}))
    s = ConfigSpace.from_yaml(p)
    assert s.parallelism == (4, 8) and s.cpu == (1.0, 2.0)
    p.write_text(yaml.safe_dump({"paralelism": [4, 8]}))
    with pytest.raises(ConfigError, match=r"space.yaml: unknown key\(s\) \['paralelism'\]"):
        ConfigSpace.from_yaml(p)
    p.write_text(yaml.safe_dump({"parallelism": [8, 4]}))
    with pytest.raises(ConfigError, match="strictly increasing"):
        ConfigSpace.from_yaml(p)
