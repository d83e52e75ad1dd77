"""What the commands share about the files they are given: a bundled scenario's name or a path,
a scenario or a trace opened with its located problems as one line each on stderr (exit 2),
and a checkpoint directory (or a hub id in the local cache) given instead of a scenario. Torch is not imported here."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from lineage.arithmetic import DTYPE_BYTES
from lineage.scenarios import DIR as SCENARIO_DIR
from lineage.scenarios import resolve  # noqa: F401  a name or a path, as the commands take it


# the scenarios made for checkpoint directories: their temporary path -> (the directory as the
# user gave it, the resolved one the scenario names); the user never wrote that path
MADE: dict[str, tuple[str, str]] = {}
# a made scenario's path -> what it was made from: the checkpoint directory, the weights file or
# the scenario (the app's `i` makes another from the same origin, on other text)
ORIGIN: dict[str, str] = {}


def err(msg: str) -> int:
    print(as_given(msg), file=sys.stderr)
    return 2


def as_given(text: str) -> str:
    """A message about a scenario made for a checkpoint directory, said about the directory:
    `TMP:4:15: model.pretrained: DIR/model.safetensors: why` -> `DIR/model.safetensors: why`,
    `TMP:L:C: why` -> `GIVEN: why`, and any other mention of TMP -> GIVEN."""
    for made, (given, root) in MADE.items():
        if text.startswith(made + ":"):
            why = re.sub(r"^\d+:\d+: ", "", text[len(made) + 1:].lstrip())
            if why.startswith("model.pretrained: "):
                why = why.removeprefix("model.pretrained: ")
                if why.startswith(root):            # the loader's message names the file in the directory
                    return why
            return f"{given}: {why}"
        text = text.replace(made, given)
    return text



# what only a programming error raises (bad data is a FrameProblem or a TraceError, a file an
# OSError, a model that runs out of memory a RuntimeError): the app names the line of ours that
# raised one (screens/stepping._where), the command line lets it through with its traceback
BUGS = (TypeError, AttributeError, IndexError, KeyError, NameError, AssertionError, ZeroDivisionError)


def first_line(e: Exception) -> str:
    """An error as one line: its message's first line, or its type when it has none."""
    return str(e).splitlines()[0] if str(e) else type(e).__name__



def check(path: str, salvage: bool = False, every_frame: bool = False) -> bool:
    """Whether a scenario loads or a trace opens (and, with every_frame, reads to the end);
    if not, its located problems go to stderr. Torch is not imported."""
    from lineage.scenario import load
    from lineage.scenario.problems import ScenarioError
    from lineage.playback.session import is_trace
    from lineage.playback.trace import TraceError, TraceReader
    try:
        if is_trace(path):
            r = TraceReader(path, salvage=salvage)
            for i in range(len(r) if every_frame else 0):
                r.frame(i)
            r.close()
        else:
            load(path)
    except ScenarioError as e:
        for line in e.lines():
            print(as_given(line), file=sys.stderr)
        return False
    except TraceError as e:
        print(as_given(str(e)), file=sys.stderr)
        return False
    return True



def missing(path: str) -> str:
    """'no such file', with the closest bundled scenario when the name looks like one ('recal')."""
    from lineage.did_you_mean import did_you_mean
    hint = did_you_mean(Path(path).stem, [f.stem for f in SCENARIO_DIR.glob("*.yaml")]) \
        if not Path(path).suffix or Path(path).suffix in (".yaml", ".yml") else ""
    return f"{path}: no such file{hint}"



def open_file(path: str, salvage: bool = False):
    """(cursor, None) or (None, exit code after printing the located problem). A long input's
    prefill shows its progress on stderr when that is a terminal."""
    from lineage.scenario.problems import ScenarioError
    from lineage.playback.trace import TraceError
    path = resolve(path)
    try:
        from lineage.playback.runners import MemoryRefused
        from lineage.playback.session import open_path, reporting_prefill
        with reporting_prefill(_prefill_on_stderr()):
            cursor = open_path(path, salvage=salvage)
        _warn_backend(cursor)
        return cursor, None
    except MemoryRefused as e:                  # its one line says the input and what it needs
        return None, err(str(e))
    except ScenarioError as e:
        for line in e.lines():
            print(as_given(line), file=sys.stderr)
        return None, 2
    except TraceError as e:
        return None, err(str(e))
    except FileNotFoundError:
        return None, err(missing(path))
    except (ValueError, RuntimeError) as e:     # never a traceback: one line, exit 2
        return None, err(f"{path}: {first_line(e)}")



def _warn_backend(cursor) -> None:
    """A mistyped LINEAGE_BACKEND, said in one line before a scenario's model runs (a trace
    replays without one): the app shows it in its status bar, a command would not say it at all."""
    from lineage.backend import env_problem
    from lineage.playback.session import Session
    problem = env_problem() if isinstance(cursor, Session) else None
    if problem is not None:
        print(f"lineage: warning: {problem}", file=sys.stderr)


def _prefill_on_stderr():
    """A prefill's progress on one rewritten line of stderr, when stderr is a terminal (None else)."""
    if not sys.stderr.isatty():
        return None
    from .loader import prefill_progress

    def say(text: str) -> None:
        print(f"\r{text}\033[K", end="", file=sys.stderr, flush=True)

    report = prefill_progress(say)

    def progress(label: str, done: int, total: int) -> None:
        report(label, done, total)
        if done >= total:
            print(file=sys.stderr, flush=True)
    return progress



def checkpoint_options(parser) -> None:
    g = parser.add_argument_group("your own input: for a scenario whose models read text (or token ids), a "
                                  "trained .safetensors file, a checkpoint directory (Hugging Face layout) or a "
                                  "hub id in the local cache (org/name)")
    g.add_argument("--text", help="input text, through the model's tokenizer (a scenario's captions, written "
                   "for its own input, are left out)")
    g.add_argument("--text-file", metavar="FILE", help="input text from a UTF-8 file (- reads stdin); "
                   "a long one is read at once up to its last 32 tokens, which are stepped, then 32 generated")
    g.add_argument("--prefill", type=int, metavar="N", help="input tokens read at once before the first step "
                   "(default: 0, or all but the last 32 of an input over 256 tokens)")
    g.add_argument("--ids", help="input token ids, e.g. 464,3139,286")
    revision_option(g)
    g.add_argument("--dtype", choices=list(DTYPE_BYTES),
                   help="a checkpoint's weights' dtype (default: its own)")
    g.add_argument("--device", choices=["auto", "cpu", "cuda"], help="where a checkpoint runs (default: auto)")
    g.add_argument("--device-map", metavar="MAP", help="place the layers over devices instead: auto, balanced, "
                   "sequential, a list such as cuda:0,cpu, or a JSON file of module -> device "
                   "(lineage memory DIR --device-map MAP shows the plan first)")



def revision_option(parser) -> None:
    parser.add_argument("--revision", metavar="REV", help="a hub id's branch, tag or commit id in the local cache "
                        "(default: main)")


def checkpoint_dir(target: str, revision: str | None = None) -> str | None:
    """The checkpoint directory a command's argument names, or None where it names none (a
    scenario, a trace, a bundled name, a missing file: the command's own reading says which).
    A directory is itself; a hub id (`org/name`, no such path or bundled name) is its snapshot in
    the local Hugging Face cache, offline (lineage.families.hub). Every command that takes a
    checkpoint asks here. PretrainedError (one line): a hub id not in the cache, a hostile ref,
    or --revision given for anything but a hub id."""
    from lineage.families import PretrainedError
    from lineage.families.hub import find_snapshot, hub_id
    if hub_id(target) is not None:
        return str(find_snapshot(target, revision))
    if revision is not None:
        raise PretrainedError(f"{target}: --revision applies to a hub id (org/name) in the Hugging Face cache")
    return target if Path(target).expanduser().is_dir() else None


def checkpoint_scenario(args, attr: str) -> int | None:
    """When args.<attr> is a directory or a cached hub id, replace it with a scenario made for
    that checkpoint; when it is a trained weights file (.safetensors with its sidecar), with one
    made for those weights; when it is a scenario given --text, --text-file or --ids, with that
    scenario on this input (lineage.scenario.own_input). Each is written to a private temporary
    folder, removed at exit. An exit code when that fails."""
    from lineage.families import PretrainedError
    target = getattr(args, attr)
    given = [f"--{k.replace('_', '-')}" for k in ("text", "text_file", "ids", "prefill", "dtype", "device", "device_map")
             if getattr(args, k, None) is not None]
    try:
        root = checkpoint_dir(target, getattr(args, "revision", None))
    except PretrainedError as e:
        return err(str(e))
    if root is None:
        return _own_input(args, attr, target, given)
    parsed = _input_args(args)
    if isinstance(parsed, int):
        return parsed
    ids, text_file, prefill = parsed
    try:
        setattr(args, attr, made_scenario(root, args.text, ids, args.dtype, args.device,
                                          text_file=text_file, prefill=prefill,
                                          device_map=getattr(args, "device_map", None), given=target))
    except PretrainedError as e:
        return err(str(e))
    except ValueError as e:                 # the text file: missing, too large, not UTF-8; --prefill past it
        return err(str(e))
    return None


def _input_args(args):
    """(ids, text file, prefill) as given, or the exit code of a line saying what is wrong."""
    ids = None
    if args.ids is not None:
        try:
            ids = [int(t) for t in args.ids.replace(",", " ").split()]
        except ValueError:
            return err(f"--ids {args.ids!r}: expected token ids, e.g. 464,3139,286")
        if not ids or min(ids) < 0:
            return err(f"--ids {args.ids!r}: expected one or more token ids >= 0")
    text_file = getattr(args, "text_file", None)
    if sum(x is not None for x in (ids, args.text, text_file)) > 1:
        return err("give one of --text, --text-file or --ids")
    prefill = getattr(args, "prefill", None)
    if prefill is not None and prefill < 0:
        return err(f"--prefill {prefill}: expected a number of tokens >= 0")
    return ids, text_file, prefill


def _own_input(args, attr: str, target: str, given: list[str]) -> int | None:
    """A weights file, or a scenario given its own input: args.<attr> replaced by the scenario
    made for it. Nothing given and not a weights file: None, the target read as it is."""
    path = resolve(target)
    weights = path.endswith(".safetensors") and Path(path).is_file()
    if not weights and not given:
        return None
    placed = [g for g in given if g in ("--dtype", "--device", "--device-map")]
    if placed:
        return err(f"{target}: {', '.join(placed)} {'applies' if len(placed) == 1 else 'apply'} to a checkpoint directory")
    if not weights and not Path(path).is_file():
        return err(missing(path))
    parsed = _input_args(args)
    if isinstance(parsed, int):
        return parsed
    ids, text_file, prefill = parsed
    try:
        setattr(args, attr, own_input_scenario(path, target, text=args.text, ids=ids, text_file=text_file,
                                               prefill=prefill))
    except ValueError as e:           # NotOwnInput, a text file that cannot be read: one line
        return err(str(e))
    return None


def own_input_scenario(path: str, name: str, *, text=None, ids=None, text_file=None, prefill=None) -> str:
    """The path of a made scenario: the weights file or scenario `path` (`name`: as the reader
    named it) on this input. `text_file` '-' is stdin. ValueError (one line) when it cannot be."""
    from lineage.scenario import ScenarioError
    from lineage.scenario.input_file import read_text_file
    from lineage.scenario.own_input import with_input
    from lineage.scenario.weights_file import weights_scenario
    folder = _made_folder()
    file = _input_file(folder, text_file)
    if file is not None:           # read here, so that a file that cannot be the input is said now
        try:
            read_text_file(str(file))
        except ValueError as e:
            raise ValueError(f"--text-file {text_file}: {e}") from None
    if path.endswith(".safetensors"):
        made = weights_scenario(path, name, text=text, file=None if file is None else str(file), ids=ids,
                                prefill=prefill)
    else:
        try:
            made, _ = with_input(path, name, text=text, file=None if file is None else str(file), ids=ids,
                                 prefill=prefill)
        except ScenarioError as e:
            raise ValueError(as_given(e.lines()[0])) from None
    out = folder / f"{Path(path).stem}-own.yaml"
    out.write_text(made, encoding="utf-8")
    MADE[str(out)] = (name, str(Path(path).resolve().parent))
    ORIGIN[str(out)] = path
    return str(out)


def _input_file(folder: Path, text_file: str | None) -> Path | None:
    """The file a made scenario reads as `input.file`: `--text-file` as given (absolute: the
    scenario lives in `folder`), or stdin (-) copied into `folder`."""
    if text_file == "-":
        file = folder / "stdin"
        file.write_bytes(_stdin_bytes())
        return file
    return None if text_file is None else Path(text_file).expanduser().absolute()


def _made_folder() -> Path:
    """A private temporary folder for made scenarios, removed at exit."""
    import atexit
    import shutil
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="lineage-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def made_scenario(target: str, text=None, ids=None, dtype=None, device=None, text_file=None, prefill=None,
                  device_map=None, given: str | None = None) -> str:
    """The path of a scenario made for the checkpoint directory `target` (in a private temporary
    folder, removed at exit; its messages are mapped back by `as_given` to `given`, what the user
    wrote: the directory, or the hub id whose snapshot `target` is); PretrainedError, or
    ValueError (one line) for a text file that cannot be the input. `text_file` '-' is stdin,
    copied into that folder (the scenario reads it as `input.file` as it reads any file)."""
    from lineage.families.scenario import checkpoint_scenario as scenario_text
    folder = _made_folder()
    file = _input_file(folder, text_file)
    made = scenario_text(target, text, ids, dtype, device, file=None if file is None else str(file),
                         prefill=prefill, file_named=text_file, device_map=_absolute_map(device_map))
    root = Path(target).expanduser().resolve()
    # a hub id's snapshot folder is named by its commit: the file takes the id's name instead
    name = given.rpartition("/")[2] if given is not None and given != target else root.name
    out = folder / f"{name or 'checkpoint'}.yaml"
    out.write_text(made, encoding="utf-8")
    MADE[str(out)] = (given or target, str(root))
    ORIGIN[str(out)] = str(root)
    return str(out)


def _absolute_map(device_map: str | None) -> str | None:
    """A map file named on the command line is relative to where the user stands, not to the
    made scenario's temporary folder."""
    if device_map is None or not device_map.strip().endswith(".json"):
        return device_map
    return str(Path(device_map.strip()).expanduser().absolute())


def _stdin_bytes() -> bytes:
    """stdin, read to its end but never past the input file limit (the limit + 1 bytes at most:
    then the scenario's own check refuses it, as it would refuse such a file)."""
    from lineage.scenario.schema import MAX_INPUT_FILE
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise ValueError("--text-file -: no standard input to read")
    data = stream.read(MAX_INPUT_FILE + 1)
    if len(data) > MAX_INPUT_FILE:
        raise ValueError(f"--text-file -: standard input is over {MAX_INPUT_FILE:,} bytes (the limit)")
    _keys_from_the_terminal(stream)
    return data


def _keys_from_the_terminal(stream) -> None:
    """`cat paper.txt | lineage run DIR --text-file -`: the pipe is read to its end, and the app
    must then read its keys from the terminal, as `less` does: /dev/tty becomes stdin (fd 0).
    Nothing changes where stdin is a terminal already, or is not fd 0, or there is no terminal."""
    import io
    try:
        if stream.fileno() != 0 or os.isatty(0):
            return
        fd = os.open("/dev/tty", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError, io.UnsupportedOperation):
        return
    os.dup2(fd, 0, inheritable=True)
    os.close(fd)


def guarded(command):
    """A command that reads scenario or trace files, run so that a reader who left
    (`lineage list | head`) ends it quietly and a frame found corrupt as it is read is its one
    line, exit 2."""
    def run(args) -> int:
        from lineage.playback.trace import TraceError
        try:
            return command(args)
        except BrokenPipeError:          # the reader left, nothing is wrong
            sys.stderr.close()
            return 0
        except TraceError as e:          # a frame found corrupt when it is read
            return err(str(e))
    return run
