"""The hostile corpus: every input here must be refused, each with its one-line error.

Files live in ``corpus/`` (JSON, TOML, #SBATCH); the few that are too big or not text
are made by ``GENERATED``. ``EXPECTED`` maps each file to the code the error line
starts with and a part of its message; ``API`` holds what the daemon answers instead
when the raw bytes are POSTed to it (the CLI reads and checks files itself first).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
SPEC = "422 INVALID_SPEC"
TASK = "spec.task_template"
REF = f"{TASK}.datavolume_refs[0]"
RES = f"{TASK}.requested_resources"
NAME_RULE = "must be 1-63 lowercase letters, digits or '-'"
SYSTEM = "must not be under /proc, /sys, /dev, /run, /var/run, /etc"
HOST = "#SBATCH --container-mounts: mount sources name a drive from the config"
UNSUPPORTED = "not supported (supported: --begin, --chdir, --container-image"


def _unknown(field: str) -> tuple[str, str]:
    return SPEC, f"{field}: unknown key"


EXPECTED: dict[str, tuple[str, str]] = {
    # host paths as drives, `..`, the Docker socket, /proc, /dev, /sys as mount targets
    "drive-name-host-path.json": (SPEC, f"{REF}.name: {NAME_RULE}"),
    "drive-name-home.toml": (SPEC, f"{REF}.name: {NAME_RULE}"),
    "drive-name-dotdot.json": (SPEC, f"{REF}.name: {NAME_RULE}"),
    "drive-name-docker-sock.json": (SPEC, f"{REF}.name: {NAME_RULE}"),
    "drive-source-key.json": _unknown(f"{REF}.source"),
    "drive-host-path-key.json": _unknown(f"{REF}.host_path"),
    "drive-unknown.json": (SPEC, "drive nosuch does not exist"),
    "drive-other-workspace.json": (
        "403 DRIVE_NOT_ALLOWED",
        "namespace vision may not mount secret",
    ),
    "drive-mode-shared.json": (SPEC, f"{REF}.mode: must be 'ReadWrite' or 'ReadOnly'"),
    "mount-dotdot.json": (SPEC, f"{REF}.mount_path: must not contain '..'"),
    "mount-dotdot-deep.toml": (SPEC, f"{REF}.mount_path: must not contain '..'"),
    "mount-relative.json": (SPEC, f"{REF}.mount_path: must be an absolute path"),
    "mount-root.json": (SPEC, f"{REF}.mount_path: must not be '/'"),
    "mount-root-dots.json": (SPEC, f"{REF}.mount_path: must not be '/'"),
    "mount-docker-sock.json": (SPEC, f"{REF}.mount_path: {SYSTEM}"),
    "mount-run-docker-sock.toml": (SPEC, f"{REF}.mount_path: {SYSTEM}"),
    "mount-proc.json": (SPEC, f"{REF}.mount_path: {SYSTEM}"),
    "mount-proc-self-root.json": (SPEC, f"{REF}.mount_path: {SYSTEM}"),
    "mount-dev.json": (SPEC, f"{REF}.mount_path: {SYSTEM}"),
    "mount-sys.toml": (SPEC, f"{REF}.mount_path: {SYSTEM}"),
    "mount-etc.json": (SPEC, f"{REF}.mount_path: {SYSTEM}"),
    "mount-usr-bin.json": (SPEC, f"{REF}.mount_path: {SYSTEM}"),
    "mount-lib64.json": (SPEC, f"{REF}.mount_path: {SYSTEM}"),
    "mount-colon.json": (SPEC, f"{REF}.mount_path: must not contain ':'"),
    "mount-twice.json": (SPEC, "datavolume_refs[1].mount_path: '/ckpt' is already mounted"),
    # privileged, host namespaces, capabilities, devices: unknown keys, never options
    "task-privileged.json": _unknown(f"{TASK}.privileged"),
    "spec-privileged.toml": _unknown("spec.privileged"),
    "task-network-mode.json": _unknown(f"{TASK}.network_mode"),
    "task-network-host.toml": _unknown(f"{TASK}.network"),
    "task-pid-mode.json": _unknown(f"{TASK}.pid_mode"),
    "task-ipc-host.toml": _unknown(f"{TASK}.ipc_mode"),
    "task-cap-add.json": _unknown(f"{TASK}.cap_add"),
    "task-devices.json": _unknown(f"{TASK}.devices"),
    "task-security-opt.json": _unknown(f"{TASK}.security_opt"),
    "task-user.json": _unknown(f"{TASK}.user"),
    "task-volumes.json": _unknown(f"{TASK}.volumes"),
    "task-runtime.json": _unknown(f"{TASK}.runtime"),
    "metadata-owner.json": _unknown("metadata.owner"),
    "metadata-uid.json": _unknown("metadata.uid"),
    "top-level-extra.json": _unknown("hostconfig"),
    # absurd sizes
    "gpus-1e9.json": (SPEC, f"{RES}.gpu_requests.count: must be between 0 and 1024"),
    "gpus-negative.json": (SPEC, f"{RES}.gpu_requests.count: must be between 0 and 1024"),
    "memory-10eib-string.json": (SPEC, f"{RES}.memory_bytes: '10EiB' is not a size"),
    "memory-10eib-bytes.json": (SPEC, f"{RES}.memory_bytes: must be at most 1PiB"),
    "per-gpu-memory-huge.toml": (SPEC, f"{RES}.per_gpu.memory_bytes: must be at most 1PiB"),
    "cpu-1e9.json": (SPEC, f"{RES}.cpu_cores: must be at most 100000 cores"),
    "workers-million.toml": (SPEC, "spec.workers: must be between 1 and 1024"),
    "time-limit-huge.json": (SPEC, f"{TASK}.time_limit_seconds: must be at most 315360000"),
    "priority-huge.json": (SPEC, "spec.priority: must be between -1000 and 1000"),
    "restart-limit-huge.json": (SPEC, "spec.restart_limit: must be between 0 and 1000"),
    # wrong types, names and values
    "name-int.json": (SPEC, f"metadata.name: {NAME_RULE}"),
    "name-uppercase.json": (SPEC, f"metadata.name: {NAME_RULE}"),
    "name-path.toml": (SPEC, f"metadata.name: {NAME_RULE}"),
    "spec-list.json": (SPEC, "spec: must be an object, got a list"),
    "document-list.json": (SPEC, "<document>: must be an object, got a list"),
    "document-null.json": (SPEC, "<document>: must be an object, got null"),
    "args-ints.json": (SPEC, f"{TASK}.args[0]: must be a string, got 1"),
    "env-nested.json": (SPEC, f"{TASK}.env.A: must be a string, got an object"),
    "env-bad-name.json": (SPEC, "'LD PRELOAD' is not a variable name"),
    "gang-string.toml": (SPEC, "spec.gang: must be true or false, got 'yes'"),
    "command-empty-list.json": (SPEC, f"{TASK}.command: must not be an empty list"),
    "image-with-flags.json": (SPEC, f"{TASK}.image: must be an image reference without spaces"),
    "image-bool.json": (SPEC, f"{TASK}.image: must be a string, got true"),
    "image-nul.json": (SPEC, f"{TASK}.image: must not contain NUL characters"),
    "time-limit-float.json": (SPEC, f"{TASK}.time_limit_seconds: must be a positive whole"),
    "priority-over-cap.json": (
        "403 PRIORITY_NOT_ALLOWED",
        "priority 50 is above namespace vision's maximum of 10",
    ),
    "workspace-unknown.json": (SPEC, "metadata.workspace: no workspace nosuch"),
    # encodings and syntax
    "nan.json": (SPEC, "<document>: not valid JSON: NaN is not a number JSON allows"),
    "infinity.json": (SPEC, "<document>: not valid JSON: Infinity is not a number JSON allows"),
    "duplicate-keys.json": (SPEC, "<document>: duplicate key 'metadata'"),
    "duplicate-keys-nested.json": (SPEC, "<document>: duplicate key 'workspace'"),
    "duplicate-keys.toml": (SPEC, "<document>: not valid TOML: Cannot overwrite a value"),
    "trailing-garbage.json": (SPEC, "<document>: not valid JSON: Extra data"),
    "truncated.json": (SPEC, "<document>: not valid JSON: Unterminated string"),
    # #SBATCH files
    "sbatch-mount-etc.sbatch": (SPEC, f"{HOST} (e.g. checkpoints:/ckpt), not a host path: '/etc'"),
    "sbatch-mount-dotdot-source.sbatch": (SPEC, f"{HOST} (e.g. checkpoints:/ckpt), not a host"),
    "sbatch-mount-home.sbatch": (SPEC, f"{HOST} (e.g. checkpoints:/ckpt), not a host"),
    "sbatch-mount-docker-sock-source.sbatch": (SPEC, "not a host path: '/var/run/docker.sock'"),
    "sbatch-mount-second-host.sbatch": (SPEC, "not a host path: '/'"),
    "sbatch-mount-docker-sock-target.sbatch": (SPEC, f"#SBATCH --container-mounts: {SYSTEM}"),
    "sbatch-mount-proc.sbatch": (SPEC, f"#SBATCH --container-mounts: {SYSTEM}"),
    "sbatch-mount-dotdot-target.sbatch": (SPEC, "--container-mounts: must not contain '..'"),
    "sbatch-mount-flags.sbatch": (SPEC, "mount flags must be ro or rw, got 'rshared'"),
    "sbatch-other-drive.sbatch": (
        "403 DRIVE_NOT_ALLOWED",
        "namespace vision may not mount secret",
    ),
    "sbatch-remap-root.sbatch": (SPEC, f"#SBATCH --container-remap-root: {UNSUPPORTED}"),
    "sbatch-privileged.sbatch": (SPEC, f"#SBATCH --privileged: {UNSUPPORTED}"),
    "sbatch-uid.sbatch": (SPEC, f"#SBATCH --uid: {UNSUPPORTED}"),
    "sbatch-container-mount-home.sbatch": (SPEC, f"--container-mount-home: {UNSUPPORTED}"),
    "sbatch-crlf.sbatch": (SPEC, "<script>: has carriage returns (DOS line breaks?)"),
    "sbatch-lone-cr.sbatch": (SPEC, "<script>: has carriage returns (DOS line breaks?)"),
    "sbatch-python.sbatch": (SPEC, "#!: only bash or sh batch scripts are supported"),
    "sbatch-gres-huge.sbatch": (SPEC, "#SBATCH --gres: must be gpu:N, gpu:type:N or shard:N"),
    "sbatch-mem-huge.sbatch": (SPEC, "#SBATCH --mem: must be at most 1PiB"),
    "sbatch-nice-huge.sbatch": (SPEC, "#SBATCH --nice: must be between -1000 and 1000"),
    "sbatch-cpus-huge.sbatch": (SPEC, "#SBATCH --cpus-per-task: must be at most 100000 cores"),
    "sbatch-job-name-path.sbatch": (SPEC, f"#SBATCH --job-name: {NAME_RULE}"),
    "sbatch-unterminated-quote.sbatch": (SPEC, "#SBATCH (line 4): cannot split"),
    "sbatch-image-space.sbatch": (SPEC, "--container-image: must be an image reference without"),
    "sbatch-time-garbage.sbatch": (SPEC, "#SBATCH --time: 'forever' is not a Slurm time"),
}

_BASE = {"metadata": {"name": "hostile", "workspace": "vision"},
         "spec": {"task_template": {"image": "busybox", "command": "true"}}}  # fmt: skip
_SBATCH = "#!/bin/bash\n#SBATCH --job-name=hostile\n#SBATCH --container-image=busybox\n"


def _with_task(**fields: object) -> bytes:
    doc = json.loads(json.dumps(_BASE))
    doc["spec"]["task_template"].update(fields)
    return json.dumps(doc).encode()


def _with_name(name: str) -> bytes:
    return json.dumps({**_BASE, "metadata": {"name": name}}).encode()


def _deep_json(depth: int) -> bytes:
    doc = json.dumps(_BASE)
    return (doc[:-1] + ', "x": ' + "[" * depth + "]" * depth + "}").encode()


# name -> (content, (code, message) for the CLI, (code, message) for the raw API or None)
GENERATED: dict[str, tuple[Callable[[], bytes], tuple[str, str], tuple[str, str] | None]] = {
    "deep-100000.json": (
        lambda: _deep_json(100_000),
        (SPEC, "<document>: not valid JSON: nested too deeply"),
        None,
    ),
    "deep-100.json": (lambda: _deep_json(100), (SPEC, "is nested more than 32 levels deep"), None),
    "deep-100000.toml": (
        lambda: b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        (SPEC, "<document>: not valid TOML: nested too deeply"),
        None,
    ),
    "name-10mb.json": (
        lambda: _with_name("a" * 10 * 1024 * 1024),
        (SPEC, "<document>: is too large"),
        ("413 REQUEST_ENTITY_TOO_LARGE", "Maximum request body size 4194304 exceeded"),
    ),
    "name-1mb.json": (lambda: _with_name("a" * 1024 * 1024), (SPEC, "metadata.name: must"), None),
    "image-1mb.json": (
        lambda: _with_task(image="b" * 1024 * 1024),
        (SPEC, f"{TASK}.image: must be at most 4096 characters, got 1048576"),
        None,
    ),
    "arg-200kb.json": (
        lambda: _with_task(args=["x" * 200_000]),
        (SPEC, f"{TASK}.args[0]: must be at most 131072 characters"),
        None,
    ),
    "args-2mb.json": (
        lambda: _with_task(args=["x" * 100_000] * 21),
        (SPEC, f"{TASK}: command, args and env must be at most 65536 characters together"),
        None,
    ),
    "env-2000.json": (
        lambda: _with_task(env={f"V{i}": "x" for i in range(2000)}),
        (SPEC, f"{TASK}.env: must have at most 1024 variables"),
        None,
    ),
    "invalid-utf8.json": (
        lambda: _with_name("x").replace(b'"x"', b'"\xff\xfe"'),
        (SPEC, "cannot read: not UTF-8 text"),
        (SPEC, "<document>: not UTF-8 (byte"),
    ),
    "invalid-utf8-surrogate.toml": (
        lambda: b'[metadata]\nname = "\xed\xa0\x80"\n',
        (SPEC, "cannot read: not UTF-8 text"),
        (SPEC, "<document>: not UTF-8 (byte"),
    ),
    "invalid-utf8-overlong.json": (
        lambda: _with_name("x").replace(b'"x"', b'"\xc0\xaf"'),
        (SPEC, "cannot read: not UTF-8 text"),
        (SPEC, "<document>: not UTF-8 (byte"),
    ),
    "sbatch-script-200kb.sbatch": (
        lambda: (_SBATCH + "echo " + "x" * 200_000 + "\n").encode(),
        (SPEC, "<script>: must be at most 131072 characters"),
        None,
    ),
    "sbatch-invalid-utf8.sbatch": (
        lambda: _SBATCH.encode() + b"echo \xff\n",
        (SPEC, "cannot read: not UTF-8 text"),
        None,
    ),
}

API: dict[str, tuple[str, str]] = {
    name: api for name, (_make, _cli, api) in GENERATED.items() if api is not None
}


def expected(name: str) -> tuple[str, str]:
    """(code, message part) of the CLI's error line for a corpus file."""
    return EXPECTED[name] if name in EXPECTED else GENERATED[name][1]


def content(name: str) -> bytes:
    return GENERATED[name][0]() if name in GENERATED else (CORPUS / name).read_bytes()


def names() -> list[str]:
    return sorted(EXPECTED) + sorted(GENERATED)
