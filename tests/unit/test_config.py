"""The config TOML: the documented example, every rule's error, overrides, write-back, home."""

from __future__ import annotations

import grp
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from runner.config.files import (
    DEFAULT_CONFIG_TEXT,
    config_path,
    default_home,
    ensure_config,
    update_config_file,
)
from runner.config.load import (
    ApiLimits,
    Config,
    ConfigError,
    Drive,
    MachineConfig,
    load_config,
    parse_config,
)
from runner.model import GIB, Quota, Workspace

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "astraeus.toml"
SOURCE = "/etc/astraeus/config.toml"
GROUP = grp.getgrgid(os.getgid()).gr_name
NO_USER = "no-such-user-astraeus"

DOCUMENTED_EXAMPLE = """\
[machine]
executor = "auto"              # auto | docker | process
gpus = "auto"                  # auto (NVML) | integer = that many simulated GPUs
cpu_cores = "auto"             # or integer
memory = "auto"                # or "512GiB"
stop_grace_seconds = 30
[admins]
users = ["root"]
[workspaces.vision]
members = ["root"]
max_priority = 10
weight = 1.0
quota = { gpus = 8, cpu_cores = 64, memory = "512GiB", workers = 4 }
[drives.checkpoints]
path = "{drive}"
workspaces = ["vision"]
"""


def parse(text: str, **env: str) -> Config:
    return parse_config(text, source=SOURCE, env=env)


def error_of(text: str, **env: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(text, **env)
    return str(caught.value)


def test_the_design_example(tmp_path: Path) -> None:
    config = parse(DOCUMENTED_EXAMPLE.replace("{drive}", str(tmp_path)))
    assert config.machine == MachineConfig("auto", None, None, None, 30.0, max_submit_per_user=1000)
    assert config.admins == frozenset({"root"})
    assert (config.admin_group, config.socket_group, config.path) == (None, None, None)
    assert config.api == ApiLimits(10.0, 5.0, 64)
    quota = Quota(gpus=8, cpu_milli=64_000, memory=512 * GIB, workers=4)
    assert config.workspaces == {"vision": Workspace("vision", quota, 1.0, 10, ("root",))}
    assert config.default_workspace == "vision"
    assert config.drives == {"checkpoints": Drive("checkpoints", tmp_path, ("vision",))}


def test_helpers(tmp_path: Path) -> None:
    config = parse(
        f"""
        [machine]
        gpus = 4
        cpu_cores = 32
        memory = "256GiB"
        executor = "process"
        [admins]
        users = ["root"]
        group = "{GROUP}"
        [api]
        socket_group = "{GROUP}"
        [workspaces.default]
        members = ["*"]
        [workspaces.vision]
        members = ["nobody"]
        weight = 2.5
        max_priority = -5
        quota = {{ cpu_cores = 0.5 }}
        [drives.shared]
        path = "{tmp_path}"
        [drives.private]
        path = "{tmp_path}"
        workspaces = ["vision"]
        """
    )
    assert config.machine == MachineConfig("process", 4, 32, 256 * GIB, 30.0)
    assert (config.admin_group, config.socket_group) == (GROUP, GROUP)
    assert config.default_workspace == "default"
    assert config.workspaces["vision"] == Workspace(
        "vision", Quota(cpu_milli=500), 2.5, -5, ("nobody",)
    )
    assert config.workspaces_of("nobody") == {"default", "vision"}
    assert config.workspaces_of("someone") == {"default"}
    assert config.is_admin("root") and not config.is_admin("nobody")
    assert config.is_admin("nobody", groups=["users", GROUP])
    assert config.drive_allowed("shared", "default") and config.drive_allowed("shared", "vision")
    assert config.drive_allowed("private", "vision")
    assert not config.drive_allowed("private", "default")
    assert not config.drive_allowed("missing", "vision")


def test_without_workspaces_everyone_shares_default() -> None:
    for text in ("", "[workspaces]\n"):
        config = parse(text)
        assert config.workspaces == {"default": Workspace("default", None, 1.0, 0, ("*",))}
        assert config.default_workspace == "default"
        assert config.workspaces_of("anyone") == {"default"}
        assert config.admins == {"root"}
        assert config.machine == MachineConfig()


def test_an_empty_quota_is_no_quota() -> None:
    assert parse("[workspaces.a]\nquota = {}").workspaces["a"].quota is None


NAME_RULE = "1-63 lowercase letters, digits or '-', starting and ending with a letter or digit"
WS = "[workspaces.vision]\n"
DRIVE = "[drives.ckpt]\n"

ERRORS: list[tuple[str, str, str]] = [
    # (toml, key path, what is wrong)
    ("[machine]\nexecutor = \n", "line 2, column 12", "invalid TOML: Invalid value"),
    ('name = "x', "line 1", "invalid TOML: Unterminated string"),
    (
        "colour = 1",
        "colour",
        "unknown key (expected one of: machine, admins, api, workspaces, drives, slurm, notify)",
    ),
    ("machine = 3", "machine", "must be a table, got 3"),
    (
        "[machine]\ngpu = 1",
        "machine.gpu",
        "unknown key (expected one of: executor, gpus, cpu_cores, memory, stop_grace_seconds,"
        " finished_retention, max_submit_per_user, max_kept_per_user, max_kept_bytes_per_user,"
        " state_reserve, log_limit, log_reserve, default_image,"
        " telemetry_seconds, restart_backoff, restart_backoff_max, memory_reserve,"
        " cpu_pinning, idle_gpu_after,"
        " idle_gpu_threshold, idle_gpu_policy, gpu_shards,"
        " mps)",
    ),
    ("[machine]\nmps = 1", "machine.mps", "must be true or false, got 1"),
    (
        "[machine]\nrestart_backoff = 10",
        "machine.restart_backoff",
        'must be a duration such as "10s", "5m" or "1h" (units s, m, h, d) up to "1d", or "0s"'
        " for none, got 10",
    ),
    (
        '[machine]\nrestart_backoff = "1m"\nrestart_backoff_max = "30s"',
        "machine.restart_backoff_max",
        "must be at least restart_backoff ('1m'), got '30s'",
    ),
    (
        "[machine]\ngpu_shards = 0",
        "machine.gpu_shards",
        "must be a whole number between 1 and 1024, got 0",
    ),
    (
        "[machine]\ntelemetry_seconds = 0",
        "machine.telemetry_seconds",
        "must be a number of seconds between 0.2 and 3600, got 0",
    ),
    (
        '[machine]\nlog_limit = "100KiB"',
        "machine.log_limit",
        "must be 0 (no limit) or at least \"1MiB\", got '100KiB'",
    ),
    (
        '[machine]\nlog_reserve = "lots"',
        "machine.log_reserve",
        "'lots' is not a size (use bytes or e.g. '64GiB', '512MiB')",
    ),
    ("[admins]\nuser = []", "admins.user", "unknown key (expected one of: users, group)"),
    (
        "[api]\nsocket = 'x'",
        "api.socket",
        "unknown key (expected one of: socket_group, request_timeout_seconds, "
        "idle_timeout_seconds, max_connections_per_user, metrics_address, metrics_run_names)",
    ),
    (
        "[api]\nidle_timeout_seconds = 0",
        "api.idle_timeout_seconds",
        "must be a number of seconds above 0, at most 3600, got 0",
    ),
    (
        "[api]\nrequest_timeout_seconds = 'soon'",
        "api.request_timeout_seconds",
        "must be a number of seconds above 0, at most 3600, got 'soon'",
    ),
    (
        "[api]\nmax_connections_per_user = 0",
        "api.max_connections_per_user",
        "must be a whole number between 1 and 100000, got 0",
    ),
    (
        WS + "preempt_within_quota = 'yes'",
        "workspaces.vision.preempt_within_quota",
        "must be true or false, got 'yes'",
    ),
    (
        WS + "member = []",
        "workspaces.vision.member",
        "unknown key (expected one of: members, max_priority, weight, quota, default_image, "
        "preempt_within_quota)",
    ),
    (
        WS + "quota = { gpu = 1 }",
        "workspaces.vision.quota.gpu",
        "unknown key (expected one of: gpus, cpu_cores, memory, workers, gpu_memory)",
    ),
    (
        DRIVE + "path = '/'\nmode = 'ro'",
        "drives.ckpt.mode",
        "unknown key (expected one of: path, workspaces)",
    ),
    (
        '[machine]\nexecutor = "k8s"',
        "machine.executor",
        "must be one of auto, docker, process, slurm, got 'k8s'",
    ),
    (
        "[machine]\ngpus = -1",
        "machine.gpus",
        'must be "auto" or a whole number between 0 and 1024, got -1',
    ),
    (
        '[machine]\ngpus = "all"',
        "machine.gpus",
        "must be \"auto\" or a whole number between 0 and 1024, got 'all'",
    ),
    (
        "[machine]\ngpus = 2.0",
        "machine.gpus",
        'must be "auto" or a whole number between 0 and 1024, got 2.0',
    ),
    (
        "[machine]\ncpu_cores = 0",
        "machine.cpu_cores",
        'must be "auto" or a whole number between 1 and 100000, got 0',
    ),
    (
        '[machine]\nmemory = "lots"',
        "machine.memory",
        "'lots' is not a size (use bytes or e.g. '64GiB', '512MiB')",
    ),
    ("[machine]\nmemory = 0", "machine.memory", 'must be "auto" or a size above 0, got 0'),
    (
        "[machine]\nstop_grace_seconds = -1",
        "machine.stop_grace_seconds",
        "must be a number of seconds between 0 and 86400, got -1",
    ),
    (
        "[machine]\nstop_grace_seconds = nan",
        "machine.stop_grace_seconds",
        "must be a number of seconds between 0 and 86400, got nan",
    ),
    (
        '[machine]\nstop_grace_seconds = "30"',
        "machine.stop_grace_seconds",
        "must be a number of seconds between 0 and 86400, got '30'",
    ),
    (
        "[machine]\nmax_submit_per_user = 0",
        "machine.max_submit_per_user",
        "must be a whole number between 1 and 1000000, got 0",
    ),
    (
        '[machine]\nmax_submit_per_user = "many"',
        "machine.max_submit_per_user",
        "must be a whole number between 1 and 1000000, got 'many'",
    ),
    (
        WS + "quota = { gpus = -1 }",
        "workspaces.vision.quota.gpus",
        "must be a whole number >= 0, got -1",
    ),
    (
        WS + "quota = { workers = -2 }",
        "workspaces.vision.quota.workers",
        "must be a whole number >= 0, got -2",
    ),
    (
        WS + "quota = { cpu_cores = -1 }",
        "workspaces.vision.quota.cpu_cores",
        "must be a number of cores >= 0, got -1",
    ),
    (
        WS + "quota = { cpu_cores = 0.0001 }",
        "workspaces.vision.quota.cpu_cores",
        "must be a multiple of 0.001 cores, got 0.0001",
    ),
    (
        WS + "quota = { memory = -1 }",
        "workspaces.vision.quota.memory",
        "must not be negative, got -1",
    ),
    (
        WS + 'quota = { memory = "5 parsecs" }',
        "workspaces.vision.quota.memory",
        "'5 parsecs' is not a size (use bytes or e.g. '64GiB', '512MiB')",
    ),
    (WS + "quota = 8", "workspaces.vision.quota", "must be a table, got 8"),
    (WS + "weight = 0", "workspaces.vision.weight", "must be a number > 0, got 0"),
    (WS + "weight = -1.5", "workspaces.vision.weight", "must be a number > 0, got -1.5"),
    (WS + "weight = true", "workspaces.vision.weight", "must be a number > 0, got true"),
    (
        WS + "max_priority = 1001",
        "workspaces.vision.max_priority",
        "must be a whole number between -1000 and 1000, got 1001",
    ),
    (
        WS + "max_priority = -1001",
        "workspaces.vision.max_priority",
        "must be a whole number between -1000 and 1000, got -1001",
    ),
    (
        WS + f'members = ["root", "{NO_USER}"]',
        "workspaces.vision.members[1]",
        f"no Unix user named '{NO_USER}' on this machine",
    ),
    (WS + 'members = "root"', "workspaces.vision.members", "must be a list of strings, got 'root'"),
    (WS + "members = [1]", "workspaces.vision.members[0]", "must be a non-empty string, got 1"),
    ("[workspaces.Vision]", "workspaces.Vision", f"workspace names must be {NAME_RULE}"),
    ('[workspaces."a b"]', 'workspaces."a b"', f"workspace names must be {NAME_RULE}"),
    ("[workspaces.-x]", "workspaces.-x", f"workspace names must be {NAME_RULE}"),
    ("[workspaces]\nvision = 1", "workspaces.vision", "must be a table, got 1"),
    (
        f'[admins]\nusers = ["{NO_USER}"]',
        "admins.users[0]",
        f"no Unix user named '{NO_USER}' on this machine",
    ),
    ('[admins]\nusers = ["*"]', "admins.users[0]", "no Unix user named '*' on this machine"),
    (
        f'[admins]\ngroup = "{NO_USER}"',
        "admins.group",
        f"no Unix group named '{NO_USER}' on this machine",
    ),
    (
        f'[api]\nsocket_group = "{NO_USER}"',
        "api.socket_group",
        f"no Unix group named '{NO_USER}' on this machine",
    ),
    (
        DRIVE + 'workspaces = ["vision"]',
        "drives.ckpt.path",
        "required: the absolute path of a host directory",
    ),
    (DRIVE + 'path = "srv/ckpt"', "drives.ckpt.path", "must be an absolute path, got 'srv/ckpt'"),
    (
        DRIVE + 'path = "/no/such/astraeus/dir"',
        "drives.ckpt.path",
        "'/no/such/astraeus/dir' is not an existing directory",
    ),
    (
        DRIVE + 'path = "/etc/hostname"',
        "drives.ckpt.path",
        "'/etc/hostname' is not an existing directory",
    ),
    (
        WS + DRIVE + 'path = "/"\nworkspaces = ["vision", "nlp"]',
        "drives.ckpt.workspaces[1]",
        "no workspace named 'nlp' (defined: vision)",
    ),
    (
        DRIVE + 'path = "/"\nworkspaces = []',
        "drives.ckpt.workspaces",
        "must name at least one workspace (leave it out to let every workspace use the drive)",
    ),
    ('[drives.CKPT]\npath = "/"', "drives.CKPT", f"drive names must be {NAME_RULE}"),
]


@pytest.mark.parametrize(("text", "key", "what"), ERRORS, ids=[e[1] for e in ERRORS])
def test_errors_name_the_file_the_key_and_the_problem(text: str, key: str, what: str) -> None:
    if "/etc/hostname" in text and not Path("/etc/hostname").is_file():
        pytest.skip("no /etc/hostname here")
    assert error_of(text) == f"{SOURCE}: {key}: {what}"


def test_log_limit_and_reserve_have_defaults_and_take_sizes() -> None:
    machine = parse("").machine
    assert (machine.log_limit, machine.log_reserve) == (64 << 20, 256 << 20)
    machine = parse('[machine]\nlog_limit = "8MiB"\nlog_reserve = 0').machine
    assert (machine.log_limit, machine.log_reserve) == (8 << 20, 0)
    assert parse("[machine]\nlog_limit = 0").machine.log_limit == 0  # no limit


def test_telemetry_seconds_defaults_to_five() -> None:
    assert parse("").machine.telemetry_seconds == 5.0
    assert parse("[machine]\ntelemetry_seconds = 0.5").machine.telemetry_seconds == 0.5


def test_stop_grace_env_overrides_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "[machine]\nstop_grace_seconds = 30"
    assert parse(text, ASTRAEUS_STOP_GRACE="5").machine.stop_grace_seconds == 5.0
    assert parse(text, ASTRAEUS_STOP_GRACE=" 2.5 ").machine.stop_grace_seconds == 2.5
    assert parse(text, ASTRAEUS_STOP_GRACE="").machine.stop_grace_seconds == 30.0
    monkeypatch.setenv("ASTRAEUS_STOP_GRACE", "7")
    assert parse_config(text).machine.stop_grace_seconds == 7.0  # os.environ by default


def test_default_image_is_read_for_the_machine_and_each_workspace() -> None:
    assert parse("").machine.default_image is None
    config = parse(
        '[machine]\ndefault_image = "pytorch:24"\n[workspaces.a]\ndefault_image = "jax:1"'
    )
    assert config.machine.default_image == "pytorch:24"
    assert config.workspaces["a"].default_image == "jax:1"


@pytest.mark.parametrize("value", ['""', '"a b"', "3"])
def test_a_bad_default_image_names_the_key(value: str) -> None:
    message = error_of(f"[machine]\ndefault_image = {value}")
    assert message.startswith(f"{SOURCE}: machine.default_image: must be an image reference")


def test_max_submit_per_user_defaults_to_1000_and_is_read() -> None:
    assert parse("").machine.max_submit_per_user == 1000
    assert parse("[machine]\nmax_submit_per_user = 5").machine.max_submit_per_user == 5


@pytest.mark.parametrize("value", ["soon", "-1", "inf", "nan", "1e9"])
def test_a_bad_stop_grace_env_names_the_variable(value: str) -> None:
    message = error_of("", ASTRAEUS_STOP_GRACE=value)
    assert message.startswith(f"{SOURCE}: ASTRAEUS_STOP_GRACE: must be a number of seconds")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ('"14d"', 14 * 86400.0), ('"2s"', 2.0), ('"90m"', 5400.0), ('"1h30m"', 5400.0),
        ('"2w"', 14 * 86400.0), ('" 12H "', 43200.0), ('"3650d"', 3650 * 86400.0),
        ('"off"', None), ("0", None), ('"0"', None),
    ],
)  # fmt: skip
def test_finished_retention_is_a_duration_or_off(value: str, seconds: float | None) -> None:
    assert parse(f"[machine]\nfinished_retention = {value}").machine.finished_retention == seconds


def test_finished_retention_defaults_to_14_days() -> None:
    assert parse("").machine.finished_retention == 14 * 86400.0
    assert MachineConfig().finished_retention == 14 * 86400.0


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ('"soon"', "'soon'"), ("-1", "-1"), ("1.5", "1.5"), ("3600", "3600"),
        ("false", "false"), ("true", "true"), ('"14"', "'14'"),
        ('"1d2"', "'1d2'"), ('"0s"', "'0s'"), ('"14 d"', "'14 d'"), ("[]", "a list"),
    ],
)  # fmt: skip
def test_a_bad_finished_retention_is_one_line_naming_the_key(value: str, shown: str) -> None:
    assert error_of(f"[machine]\nfinished_retention = {value}") == (
        f'{SOURCE}: machine.finished_retention: must be a duration such as "14d", "12h" or'
        f' "90s" (units s, m, h, d, w), or "off", got {shown}'
    )


def test_a_finished_retention_above_ten_years_is_refused() -> None:
    assert error_of('[machine]\nfinished_retention = "3651d"') == (
        f"{SOURCE}: machine.finished_retention: must be at most 3650d, got '3651d'"
    )


def test_load_config_records_the_path_and_reports_unreadable_files(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(DEFAULT_CONFIG_TEXT)
    assert load_config(path, env={}).path == path
    with pytest.raises(ConfigError, match=r"missing\.toml: cannot read: No such file"):
        load_config(tmp_path / "missing.toml", env={})
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match=r"config\.toml: not UTF-8 text$"):
        load_config(path, env={})


# ------------------------------------------------------------------ shipped default and home


def test_the_shipped_default_is_the_embedded_text_and_parses() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == DEFAULT_CONFIG_TEXT
    config = parse(DEFAULT_CONFIG_TEXT)
    assert config.machine == MachineConfig("auto", None, None, None, 30.0, max_submit_per_user=1000)
    assert config.admins == {"root"}
    assert config.workspaces == {"default": Workspace("default", None, 1.0, 0, ("*",))}
    assert config.drives == {}


def test_ensure_config_writes_the_default_once(tmp_path: Path) -> None:
    home = tmp_path / "home" / ".astraeus"
    path = ensure_config(home)
    assert path == config_path(home) == home / "config.toml"
    assert path.read_text() == DEFAULT_CONFIG_TEXT
    path.write_text("# mine\n")
    assert ensure_config(home) == path
    assert path.read_text() == "# mine\n"
    assert sorted(p.name for p in home.iterdir()) == ["config.toml"]


def test_default_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_home({"ASTRAEUS_HOME": str(tmp_path)}) == tmp_path
    assert default_home({"ASTRAEUS_HOME": ""}) == Path.home() / ".astraeus"
    monkeypatch.setenv("ASTRAEUS_HOME", "~/elsewhere")
    assert default_home() == Path.home() / "elsewhere"


# ------------------------------------------------------------------ writing back

HEADER = "# Lab workstation config.\n#\n# Ask Dana before changing quotas.\n"
WRITABLE = f"""{HEADER}
[machine]
gpus = 2  # two simulated GPUs

[workspaces.vision]
members = ["root"]
max_priority = 10
quota = {{ gpus = 8, memory = "512GiB" }}
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(WRITABLE)
    path.chmod(0o640)
    return path


def set_quota_gpus(value: Any) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        data["workspaces"]["vision"]["quota"]["gpus"] = value

    return mutate


def test_update_writes_a_valid_change_atomically(config_file: Path) -> None:
    config = update_config_file(config_file, set_quota_gpus(4), env={})
    assert config.path == config_file
    assert config.workspaces["vision"].quota == Quota(gpus=4, memory=512 * GIB)
    assert load_config(config_file, env={}) == config
    text = config_file.read_text()
    assert text.startswith(HEADER + "\n[machine]\n")
    assert "two simulated GPUs" not in text  # comments past the header are lost
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o640
    assert [p.name for p in config_file.parent.iterdir()] == ["config.toml"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "workspaces.vision.quota.gpus: must be a whole number >= 0, got -1"),
        (None, "cannot write as TOML: "),
    ],
)
def test_update_refuses_an_invalid_result_and_leaves_the_file(
    config_file: Path, value: object, message: str
) -> None:
    before = config_file.read_bytes()
    with pytest.raises(ConfigError, match=f"^{config_file}: {message}"):
        update_config_file(config_file, set_quota_gpus(value), env={})
    assert config_file.read_bytes() == before
    assert [p.name for p in config_file.parent.iterdir()] == ["config.toml"]


def test_update_keeps_a_symlinked_config_a_symlink(config_file: Path, tmp_path: Path) -> None:
    link = tmp_path / "link" / "config.toml"
    link.parent.mkdir()
    link.symlink_to(config_file)
    update_config_file(link, set_quota_gpus(3), env={})
    assert link.is_symlink()
    assert load_config(config_file, env={}).workspaces["vision"].quota == Quota(3, None, 512 * GIB)


def test_update_of_a_file_without_header_and_of_the_shipped_default(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[workspaces.a]\nmembers = ["*"]\n')
    update_config_file(path, lambda data: data["workspaces"]["a"].update(weight=3.0), env={})
    assert path.read_text() == '[workspaces.a]\nmembers = [\n    "*",\n]\nweight = 3.0\n'
    path.write_text(DEFAULT_CONFIG_TEXT)
    update_config_file(path, lambda data: data["workspaces"]["default"].update(max_priority=5))
    header = DEFAULT_CONFIG_TEXT[: DEFAULT_CONFIG_TEXT.index("\n[machine]")].rstrip()
    assert path.read_text().startswith(header + "\n\n[machine]\n")
    assert load_config(path).workspaces["default"].max_priority == 5


SLURM = '[machine]\nexecutor = "slurm"\n[slurm]\n'


def test_a_front_for_slurm_reads_its_table() -> None:
    config = parse(
        SLURM + 'privileged = true\npartition = "low"\npriority_partitions = { high = 100 }\n'
        'log_dir = "/shared/logs"\nbin_dir = "/opt/slurm/bin"\n'
        '[slurm.workspaces.vision]\naccount = "vision"\n[slurm.drives]\nckpt = "/shared/ckpt"\n'
    )
    assert config.machine.executor == "slurm" and config.slurm is not None
    settings = config.slurm.settings
    assert settings.privileged and settings.default.partition == "low"
    assert settings.priority_partitions == ((100, "high"),)
    assert settings.workspaces["vision"].account == "vision"
    assert settings.drives == {"ckpt": "/shared/ckpt"}
    assert config.slurm.bin_dir == "/opt/slurm/bin"
    assert parse(SLURM).slurm is not None  # every key has a default
    assert parse("").slurm is None


@pytest.mark.parametrize(
    ("text", "key", "what"),
    [
        ("queue = 1", "slurm.queue", "unknown key (expected one of: pyxis, privileged,"),
        ("pyxis = 1", "slurm.pyxis", "must be true or false"),
        ('log_dir = "logs"', "slurm.log_dir", "must be an absolute path"),
        ('partition = "a b"', "slurm", "partition: must be a non-empty string without spaces"),
        ('priority_partitions = { high = "x" }', "slurm.priority_partitions.high", "must be a"),
        ("[slurm.drives]\nckpt = 3", "slurm.drives.ckpt", "must be a non-empty string"),
    ],
)
def test_a_bad_slurm_table_is_one_line_naming_the_key(text: str, key: str, what: str) -> None:
    assert error_of(SLURM + text).startswith(f"{SOURCE}: {key}")
    assert what in error_of(SLURM + text)


def test_memory_reserve_keeps_the_machine_s_last_memory_from_runs() -> None:
    from runner.daemon.daemon import handed_memory

    gib = 1 << 30
    assert handed_memory(16 * gib, None) == 15 * gib  # 1 GiB: more than 5 %
    assert handed_memory(100 * gib, None) == 95 * gib  # 5 %: more than 1 GiB
    assert handed_memory(16 * gib, 4 * gib) == 12 * gib
    assert handed_memory(16 * gib, 0) == 16 * gib
    config = parse('[machine]\nmemory_reserve = "2GiB"\n')
    assert config.machine.memory_reserve == 2 * gib
