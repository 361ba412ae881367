"""Into a running run: ``astra exec`` (a command inside its worker) and ``astra attach``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import termios
import threading
import tty as tty_mode
from collections.abc import Iterator
from typing import Annotated

import typer

from astraeus_tui.cli.common import RAW_HELP, complete_run, echo, fail, output_writer
from astraeus_tui.client import STARTED, WAITING, ApiError, AsyncClient, Client

RunArg = Annotated[str, typer.Argument(help="The run's name.", autocompletion=complete_run)]
WorkerOption = Annotated[
    int | None, typer.Option("--worker", help="Which worker (default: the first).")
]
InteractiveOption = Annotated[
    bool, typer.Option("--interactive", "-i", help="Pass standard input on.")
]
READ = 65536


def exec_command(
    name: RunArg,
    command: Annotated[list[str], typer.Argument(help="The command and its arguments, after --.")],
    worker: WorkerOption = None,
    interactive: InteractiveOption = False,
    tty: Annotated[bool, typer.Option("--tty", "-t", help="Give the command a terminal.")] = False,
) -> None:  # fmt: skip
    """Run a command inside a running run's worker, as its user, with its environment.

    The exit code is the command's. `-it` gives a shell: astra exec RUN -it -- bash."""
    try:
        code = asyncio.run(_exec(name, command, worker, interactive, tty))
    except ApiError as e:
        fail(str(e))
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


async def _exec(
    name: str, argv: list[str], worker: int | None, interactive: bool, tty: bool
) -> int:
    size = shutil.get_terminal_size()
    client = AsyncClient()
    try:
        async with client.exec(
            name, argv, worker=worker, tty=tty, rows=size.lines, cols=size.columns
        ) as channel:
            with _raw(tty and interactive and sys.stdin.isatty()):
                feeding = _feed(channel) if interactive else None
                if feeding is None:
                    await channel.send_eof()
                if tty:
                    loop = asyncio.get_running_loop()
                    loop.add_signal_handler(signal.SIGWINCH, _resized, channel)
                async for channel_no, data in channel.output():
                    if isinstance(data, bytes):
                        _write_all(2 if channel_no == 2 else 1, data)
                if feeding is not None:
                    feeding.cancel()
        if channel.exit_code is None:
            raise ApiError(0, "", "the exec session ended without the command's exit code")
        return channel.exit_code
    finally:
        await client.close()


def _feed(channel: object) -> asyncio.Task[None]:
    """Standard input to the command, in order, until it ends (then end-of-file)."""
    from astraeus_tui.client import ExecChannel

    assert isinstance(channel, ExecChannel)
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            data = os.read(0, READ)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(0)
        chunks.put_nowait(data)

    async def send() -> None:
        while data := await chunks.get():
            await channel.send(data)
        await channel.send_eof()

    loop.add_reader(0, readable)
    return asyncio.create_task(send())


def _resized(channel: object) -> None:
    from astraeus_tui.client import ExecChannel

    assert isinstance(channel, ExecChannel)
    size = shutil.get_terminal_size()
    asyncio.get_running_loop().create_task(channel.resize(size.lines, size.columns))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def _raw(wanted: bool) -> Iterator[None]:
    """The terminal in raw mode while the command has it; as it was afterwards."""
    if not wanted:
        yield
        return
    saved = termios.tcgetattr(0)
    tty_mode.setraw(0)
    try:
        yield
    finally:
        termios.tcsetattr(0, termios.TCSADRAIN, saved)


def take_terminal(name: str) -> int:
    """Wait for the interactive run ``name`` to start, then give it this terminal; its
    exit code. Ctrl-C (or the terminal closing) cancels the run."""
    try:
        return asyncio.run(_terminal(name))
    except ApiError as e:
        echo(str(e), err=True)
        return 1
    except KeyboardInterrupt:
        echo(f"{name}: cancelled: its terminal was closed before it ended", err=True)
        return 130


async def _terminal(name: str) -> int:
    size = shutil.get_terminal_size()
    client = AsyncClient()
    raw, feeding = contextlib.ExitStack(), None
    try:
        async with client.terminal(name, rows=size.lines, cols=size.columns) as channel:
            async for kind, data in channel.output():
                if isinstance(data, bytes):
                    _write_all(1, data)
                elif kind == WAITING:  # its reason, as it changes
                    reason = f": {data['reason']}" if data.get("reason") else ""
                    echo(f"{name}: {data.get('state')}{reason}", err=True)
                elif kind == STARTED and feeding is None:  # it runs: the terminal is its
                    raw.enter_context(_raw(sys.stdin.isatty()))
                    feeding = _feed(channel)
                    loop = asyncio.get_running_loop()
                    loop.add_signal_handler(signal.SIGWINCH, _resized, channel)
            if feeding is not None:
                feeding.cancel()
    finally:
        raw.close()
        await client.close()
    ended = channel.ended
    reason = f" ({ended['reason']})" if ended.get("reason") else ""
    echo(f"{name}: {ended.get('state')}{reason}", err=True)
    return channel.exit_code if channel.exit_code is not None else 1


def attach(
    name: RunArg, raw: Annotated[bool, typer.Option("--raw", help=RAW_HELP)] = False
) -> None:
    """Follow a run's output and its state until it ends; Ctrl-C detaches, never stops it.

    The exit code follows the run's, as `astra wait`'s does. On a terminal, control
    sequences but colour are shown escaped; piped, or with --raw, the bytes as written."""
    write = output_writer(raw)
    client = Client(timeout=None)
    try:
        client.show(name)  # a run that is not there, or not ours to read: one line, now
    except ApiError as e:
        fail(str(e))
    stop = threading.Event()
    threading.Thread(target=_states, args=(name, stop), daemon=True).start()
    try:
        for chunk in client.logs(name, follow=True):
            write(chunk)
    except ApiError as e:
        fail(str(e))
    except KeyboardInterrupt:
        echo(f"{name}: detached; it goes on", err=True)
        raise typer.Exit(130) from None
    stop.set()
    from astraeus_tui.cli.fast.out import finish
    from astraeus_tui.cli.fast.runs import wait_until_finished

    raise typer.Exit(finish(lambda: wait_until_finished(name, None)))


def _states(name: str, stop: threading.Event) -> None:
    """The run's events as they come, on stderr: what the run goes through."""
    with contextlib.suppress(ApiError, OSError):
        for event in Client(timeout=None).events(name, follow=True):
            if stop.is_set():
                return
            echo(f"[{event.kind}] {event.message}", err=True)


def register(app: typer.Typer) -> None:
    app.command("exec")(exec_command)
    app.command("attach")(attach)
