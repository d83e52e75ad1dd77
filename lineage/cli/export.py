"""`lineage record`, `lineage snapshot` and `lineage slides`: the commands that write a scenario's
steps to files (a trace, a picture or text of one step, a deck of slides). Bad input: one line on
stderr, exit 2."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from lineage.files import name_max, output_problem, write_new

from .opening import BUGS, as_given, checkpoint_options, err, first_line, guarded, open_file, resolve


def add_commands(sub) -> None:
    pr = sub.add_parser("record", help="run a scenario and write its frames to a trace file")
    pr.add_argument("scenario")
    pr.add_argument("-o", "--output", required=True)
    pr.add_argument("--steps", type=int, default=None, help="record only the first N steps")
    pr.add_argument("--force", action="store_true", help="replace OUT if it exists")
    checkpoint_options(pr)
    pr.set_defaults(func=guarded(_record), file_arg="scenario")
    ps = sub.add_parser("snapshot", help="render a step of a scenario or trace to a file")
    ps.add_argument("source")
    ps.add_argument("--step", type=int, required=True, help="1-based step, as the app's counter shows")
    ps.add_argument("--panel", default=None, help="only this panel kind")
    ps.add_argument("-o", "--output", required=True, help="OUT.txt (or - for stdout)")
    ps.add_argument("--salvage", action="store_true", help="read the complete frames of a truncated trace")
    ps.add_argument("--force", action="store_true", help="replace OUT if it exists")
    ps.add_argument("--size", type=int, nargs=2, default=None, metavar=("W", "H"),
                    help="terminal size for .svg and .png snapshots (default 160 50; 100 30 with --panel)")
    _export_options(ps)
    checkpoint_options(ps)
    ps.add_argument("--no-cache", action="store_true",
                    help="make the steps again instead of reading (and keeping) them in the trace cache")
    ps.set_defaults(func=guarded(_snapshot), file_arg="source")
    psl = sub.add_parser("slides", help="one PNG (and .txt) per caption step of a scenario or trace, numbered, for a deck")
    psl.add_argument("source")
    psl.add_argument("-o", "--output", required=True, help="a directory (made if missing)")
    psl.add_argument("--panel", default=None, help="slides of this panel kind only (title, step, token, caption)")
    psl.add_argument("--size", type=int, nargs=2, default=None, metavar=("W", "H"),
                     help="terminal size (default 160 50; 100 30 with --panel)")
    psl.add_argument("--salvage", action="store_true", help="read the complete frames of a truncated trace")
    psl.add_argument("--force", action="store_true", help="replace slides of the same names already in DIR")
    _export_options(psl)
    psl.set_defaults(func=guarded(_slides))


def _record(args) -> int:
    import time
    from lineage.playback.session import Session
    out = Path(args.output)
    if args.steps is not None and args.steps < 1:    # 0 or -5 would write a trace of no frames
        return err(f"--steps {args.steps}: record at least 1 step (leave it out for all of them)")
    problem = output_problem(out, [resolve(args.scenario)], args.force)
    if problem is not None:                  # before the model is built: fail in milliseconds
        return err(f"{out}: {problem}")
    cur, code = open_file(args.scenario)
    if cur is None:
        return code
    if not isinstance(cur, Session):
        return err(f"{args.scenario}: is already a trace (record takes a scenario)")
    n = cur.total if args.steps is None else min(args.steps, cur.total)
    t0 = time.perf_counter()
    try:
        writer = cur.record_to(out, overwrite=args.force)
    except OSError as e:                     # exists meanwhile, another recording, read-only directory
        return err(f"{out}: {e.strerror or e}")
    try:
        cur.record_all(n)
    except KeyboardInterrupt:
        _close_quietly(cur)
        print(f"{out}: interrupted: its first {writer.frames} frames are kept", file=sys.stderr)
        return 130
    except OSError as e:                     # a full disk, most likely
        if writer.frames == 0:               # nothing to keep: no file (and a --force'd one stays)
            writer.abandon()
            _close_quietly(cur)
            return err(f"{out}: {e.strerror or e} before the first frame; nothing was written")
        _close_quietly(cur)
        return err(f"{out}: {e.strerror or e} after {writer.frames} frames; those are kept "
                    f"(lineage run {out} --salvage)")
    except Exception as e:  # noqa: BLE001  the model failed at a step: one line, and no stale .partial left
        _close_quietly(cur)
        if isinstance(e, BUGS):              # ours, not the scenario's: its traceback, exit 1
            raise
        reason = first_line(e)
        return err(f"{args.scenario}: step {writer.frames + 1}: {reason}; the {writer.frames} frames before it "
                    f"are in {out}")
    try:
        cur.close()
    except OSError as e:
        return err(f"{out}: {e.strerror or e}")
    dt = time.perf_counter() - t0
    size = out.stat().st_size
    print(f"{out}: {n} steps in {dt:.2f} s ({n / dt:.1f} steps/s), {size:,} bytes "
          f"({writer.bytes_frames / max(n, 1):,.0f} bytes per step)")
    if args.steps is not None and args.steps > cur.total:
        print(f"note: the scenario has {cur.total} steps; recorded all of them", file=sys.stderr)
    return 0



def _close_quietly(cur) -> None:
    try:
        cur.close()          # publishes what was written, even without its footer
    except OSError:
        pass



def _cached(args):
    """The scenario's frames up to --step from the trace cache (lineage/playback/cache.py), or
    None: a trace, --no-cache, a miss, or a file with problems (which open_file then reports)."""
    from lineage.playback.session import is_trace
    from lineage.scenario.problems import ScenarioError
    path = resolve(args.source)
    if args.no_cache or args.salvage or is_trace(path):
        return None
    try:
        from lineage.playback.cache import lookup
        from lineage.scenario import load
        return lookup(load(path), args.step)
    except (ScenarioError, OSError, ValueError):
        return None



def _progress(source: str):
    """Progress of the steps a snapshot makes, on one rewritten line of a terminal's stderr."""
    import time
    if not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(made: int, needed: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.2 or made == needed:
            last[0] = now
            end = "\n" if made == needed else ""
            print(f"\r{source}: computing step {made} / {needed}", end=end, file=sys.stderr, flush=True)
    return show



def _snapshot(args) -> int:
    from lineage.playback.session import Session
    problem = _export_problem(args)
    if problem is not None:
        return err(problem)
    out = Path(args.output)
    if str(out) != "-":                      # before anything is opened: fail in milliseconds
        problem = output_problem(out, [resolve(args.source)], args.force)
        if problem is None and out.suffix not in (".txt", ".svg", ".png"):
            problem = "the snapshot format comes from the suffix: .txt, .svg or .png"
        if problem is not None:
            return err(f"{out}: {problem}")
    cur = _cached(args)
    if cur is None:
        cur, code = open_file(args.source, salvage=args.salvage)
        if cur is None:
            return code
    publish = None
    try:
        if not 1 <= args.step <= cur.total:
            return err(f"{args.source}: step {args.step} is out of range (1-{cur.total})")
        if isinstance(cur, Session) and not args.no_cache:
            from lineage.playback.cache import record_into_cache
            notes: list[str] = []
            publish = record_into_cache(cur, notes)
            for why in notes:              # refused, or no room for even its header: said, run uncached
                print(f"{args.source}: note: {why}", file=sys.stderr)
            if publish is not None and cur.made < args.step:
                print(f"{as_given(args.source)}: computing steps {cur.made + 1} - {args.step} (kept in the trace cache "
                      "for next time; --no-cache skips it)", file=sys.stderr)
        return _snapshot_of(cur, args, out)
    finally:
        cur.close()                    # a session recording into the cache publishes its trace here
        if publish is not None:
            publish()
            if publish.problem is not None:    # a full cache disk: the snapshot stands, the entry does not
                print(f"{args.source}: note: {publish.problem}", file=sys.stderr)



def _snapshot_of(cur, args, out: Path) -> int:
    from lineage.playback.trace import TraceError
    try:                         # a corrupt frame or a failing model: its one line here, not inside the headless app
        cur.frame(args.step - 1, progress=_progress(args.source))
    except TraceError:
        raise
    except BUGS:                 # ours, not the file's: its traceback, exit 1
        raise
    except Exception as e:  # noqa: BLE001
        return err(f"{args.source}: step {args.step}: {first_line(e)}")
    if out.suffix in (".svg", ".png"):
        from lineage.app.headless import render_svg
        from lineage.app.snapshot import svg_to_png
        try:
            svg = render_svg(resolve(args.source), args.step - 1, args.panel,
                             tuple(args.size) if args.size else None, args.salvage, cursor=cur, theme=args.theme)
        except RuntimeError as e:            # the headless app could not open or show it: one line
            return err(str(e).splitlines()[0])
        return _write(out, svg if out.suffix == ".svg" else svg_to_png(svg, args.scale, args.theme), args.force)
    from lineage.app.headless import slide_text
    text = slide_text(cur, args.step - 1, args.panel)
    if str(out) == "-":
        sys.stdout.write(text)
        return 0
    return _write(out, text, args.force)


def _write(out: Path, data, force: bool) -> int:
    """The snapshot as `out`, whole or not at all (a full disk leaves no part of it)."""
    try:
        write_new(out, data, force)
    except OSError as e:
        return err(f"{out}: {e.strerror or e}")
    return 0



def _export_options(parser) -> None:
    """What `snapshot` and `slides` share for pictures: scale and theme."""
    parser.add_argument("--scale", type=float, default=1.0, help="PNG zoom, e.g. 2 for a projector (default 1)")
    parser.add_argument("--theme", choices=("dark", "light"), default="dark", help="colours of the picture (default dark)")



def _export_problem(args) -> str | None:
    if not 0.25 <= args.scale <= 8:
        return f"--scale {args.scale:g}: give a zoom from 0.25 to 8"
    if args.size is not None and not (40 <= args.size[0] <= 400 and 12 <= args.size[1] <= 200):
        return f"--size {args.size[0]} {args.size[1]}: give 40-400 columns and 12-200 rows"
    from lineage.app.panels import PANELS
    if args.panel is not None and args.panel not in PANELS:
        return f"--panel {args.panel!r}: unknown panel (one of {', '.join(PANELS)})"
    return None



def _slides(args) -> int:
    """lineage slides SCENARIO -o DIR/: one PNG and .txt per caption, at the step it is true."""
    problem = _export_problem(args)
    if problem is not None:
        return err(problem)
    if args.panel == "captions":             # refused before the deck's folder is made
        from lineage.app.headless import CAPTIONS_ALONE
        return err(CAPTIONS_ALONE)
    out = Path(args.output)
    problem = _deck_problem(out)
    if problem is not None:
        return err(f"{out}: {problem}")
    cur, code = open_file(args.source, salvage=args.salvage)
    if cur is None:
        return code
    from lineage.app.headless import slide_names, write_slides
    from lineage.app.snapshot import slide_steps
    names = slide_names(slide_steps(cur.info, cur.total, args.panel))
    problem, others = _names_problem(out, names, resolve(args.source), args.force)
    if problem is not None:
        cur.close()
        return err(problem)
    try:                          # every step a slide shows, before the headless app starts
        for i in slide_steps(cur.info, cur.total, args.panel):
            cur.frame(i)
    except Exception as e:  # noqa: BLE001  a failing model or a corrupt frame: one line
        cur.close()
        if isinstance(e, BUGS):              # ours, not the file's: its traceback, exit 1
            raise
        return err(f"{args.source}: {first_line(e)}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = write_slides(resolve(args.source), out, cur, args.panel, tuple(args.size) if args.size else None,
                               args.scale, args.theme, args.salvage, args.force)
    except RuntimeError as e:
        return err(str(e).splitlines()[0])
    except OSError as e:          # a full disk, a read-only directory: the slides written so far stay
        return err(f"{Path(e.filename) if e.filename else out}: {e.strerror or e}")
    finally:
        cur.close()
    print(f"{out}: {len(written) // 2} slides ({written[0].name} ... {written[-2].name}) and their .txt")
    if others:
        print(f"note: {len(others)} other slide files in {out} were left as they were ({others[0]}, ...)",
              file=sys.stderr)
    return 0


def _deck_problem(out: Path) -> str | None:
    """Why slides cannot go to the directory `out`, or None. A directory reached through a
    symbolic link is the user's choice; a link left dangling there is not a directory."""
    limit = name_max(".")
    for part in out.parts:                 # asked first: every other question about it raises
        size = len(os.fsencode(part))
        if size > limit:
            return f"a name in the path is {size} bytes; this file system takes at most {limit}"
    try:
        if out.is_dir():
            return None
        if os.path.lexists(out):
            return "is a symbolic link to nothing; slides go to a directory" if out.is_symlink() \
                else "is a file; slides go to a directory"
    except OSError as e:
        return e.strerror or str(e)
    return None


def _names_problem(out: Path, names: list[str], source: str, force: bool) -> tuple[str | None, list[str]]:
    """(why the deck must not be written, None) and the slide files of another deck already in
    `out`, which are never touched. Without --force a deck never replaces a file: not a slide of
    the same name, not a note that happens to carry one."""
    if not out.is_dir():
        return None, []
    mine = {n + s for n in names for s in (".png", ".txt")}
    for name in sorted(mine):
        problem = output_problem(out / name, [source], force)
        if problem is not None:
            return f"{out / name}: {problem}", []
    present = sorted(p.name for p in out.glob("[0-9]*-step[0-9]*.*") if p.suffix in (".png", ".txt"))
    others = [n for n in present if n not in mine]
    if others and not force:
        return f"{out}: holds the slides of another deck ({others[0]}, ...); choose an empty directory " \
               "or --force (they are left as they are)", []
    return None, others
