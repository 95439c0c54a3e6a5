"""`gigpo` command line: train, eval, envs, play, sweep, serve, serve-retriever, view, audit."""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

#: ``--import``'s help: every kind of plug-in a module may register (docs/design.md "Plug-ins")
IMPORT_HELP = ("import MODULE first (repeatable): a module that registers envs (gigpo.envs.register), estimators, "
               "engines, trackers or losses (register_estimator, register_engine, register_tracker, register_loss)")


def _error(command: str, err: BaseException | str) -> int:
    """Report a usage/config error as one line on stderr; exit status 2 (as argparse does). Under torchrun every
    rank meets the same error: only rank 0 prints it."""
    import os

    if os.environ.get("RANK", "0").strip() in ("", "0"):
        print(f"gigpo {command}: error: {' '.join(str(err).split())}", file=sys.stderr)
    return 2


def _import_env_modules(args: argparse.Namespace) -> None:
    """``--import MODULE`` (repeatable): the plug-in modules of :data:`IMPORT_HELP`, imported before the config."""
    from gigpo.envs.registry import import_env_modules

    import_env_modules(getattr(args, "imports", None) or [])


def _train(args: argparse.Namespace) -> int:
    code = 1
    try:
        return (code := _train_run(args))
    finally:
        dist = sys.modules.get("gigpo.train.parallel.distributed")  # imported with the trainer (torch): not for errors
        if dist is not None:
            dist.shutdown(synchronize=code == 0)  # leave the process group (a no-op in one process)


def _train_run(args: argparse.Namespace) -> int:
    from gigpo.envs.base import EnvError
    from gigpo.envs.registry import EnvImportError
    from gigpo.train.config import ConfigError, load_config, parse_cli_overrides
    from gigpo.train.rundir import NothingToDo, check_fresh_run_dir, plan_resume
    from gigpo.train.rundir.checkpoint import CheckpointError
    from gigpo.train.rundir.provenance import import_recorded

    try:
        _import_env_modules(args)
        if args.resume and args.print_config:
            raise ConfigError("--print-config shows the config of a fresh run; a resumed run's config is "
                              "RUN_DIR/config.yaml")
        if args.resume:
            if args.config:  # the run's own config.yaml is the config of a resume; a second one would be ignored
                raise ConfigError("--config cannot be combined with --resume (a resume uses RUN_DIR/config.yaml; "
                                  "change keys with key=value)")
            import_recorded(args.resume, getattr(args, "imports", None) or [])
            plan = plan_resume(args.resume, parse_cli_overrides(args.overrides) if args.overrides else None,
                               allow_config_change=getattr(args, "allow_config_change", False))
            from gigpo.train.compose import preflight
            from gigpo.train.parallel import distributed
            from gigpo.train.rundir import install_sigterm_as_interrupt
            from gigpo.train.trainer import Trainer

            same_start = preflight(plan.cfg, str(plan.checkpoint / "model"))  # the resumed env/device, before the model
            distributed.init(plan.cfg)  # under torchrun: join the job's process group
            trainer = Trainer.from_plan(plan)
            print(f"resuming {plan.checkpoint} (iteration {plan.iteration} of {plan.cfg.train.iterations})")
        else:
            if getattr(args, "allow_config_change", False):
                raise ConfigError("--allow-config-change only applies to --resume")
            cfg = load_config(args.config, args.overrides)
            if args.print_config:  # the resolved configuration (presets applied); no env, model or run dir
                from gigpo.train.config import config_yaml

                print(config_yaml(cfg), end="")
                return 0
            check_fresh_run_dir(cfg)  # a used run directory: refused before the env probe and the model load
            from gigpo.train.compose import preflight
            from gigpo.train.parallel import distributed
            from gigpo.train.rundir import install_sigterm_as_interrupt
            from gigpo.train.trainer import Trainer

            same_start = preflight(cfg)  # a missing dataset, bad env option or device: one error, before the model
            distributed.init(cfg)  # under torchrun: join the job's process group
            trainer = Trainer(cfg)
    except NothingToDo as e:  # a finished run is not an error: scripts may resume idempotently
        print(e)
        return 0
    except (ConfigError, FileNotFoundError, EnvError, CheckpointError, EnvImportError) as e:
        return _error("train", e)
    install_sigterm_as_interrupt()
    if trainer.cfg.rollout.env_workers == "inline":  # a segfaulting env: say which, and what contains it
        from gigpo.envs import crash_report

        crash_report.install(trainer.run_dir)
    if trainer.dist.is_main:
        print(f"run directory: {trainer.run_dir}")
    from gigpo.agent.constrained import ActionEncodingError
    from gigpo.envs.restore import ReplayDivergence
    from gigpo.rollout.engines import EngineError
    from gigpo.train.collect.dynamic_sampling import RunFailed  # loaded with the trainer: no import cost
    from gigpo.train.preflight.action_check import NoValidActions

    try:
        last = trainer.train()
    except KeyboardInterrupt:
        return 130
    # an engine that cannot go on (e.g. a server gone for good after its retries: the contract's EngineError);
    # rollout.branch: an env whose replay left its recording (not deterministic given seed and actions after all)
    except (EngineError, ReplayDivergence) as e:
        from gigpo.train.rundir.checkpoint import list_checkpoints

        done = list_checkpoints(trainer.run_dir)
        print(f"gigpo train: error: {e}; last checkpoint: {done[-1] if done else 'none'} (intact)", file=sys.stderr)
        return 1
    # a full disk during a save (the previous checkpoint is intact), or envs that failed every trajectory
    except (CheckpointError, RunFailed, NoValidActions) as e:
        print(f"gigpo train: error: {e}", file=sys.stderr)
        return 1
    except ActionEncodingError as e:  # constrained decoding: an action the tokenizer or the budget cannot take
        print(f"gigpo train: error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # another rank died or hung: its own error (printed there) is the one to read
        if not (trainer.dist.active and distributed.is_peer_failure(e)):
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"gigpo train: rank {trainer.dist.rank}: stopped, another rank failed ({first[:200]})", file=sys.stderr)
        return 1
    if not trainer.dist.is_main:
        return 0
    keys = [k for k in ("rollout/success_rate", "eval/success_rate", "eval/score") if k in last]
    from gigpo.train.preflight.heldout import SAME_START

    held = f" [eval: {SAME_START}]" if same_start and any(k.startswith("eval/") for k in keys) else ""
    print("done. " + ", ".join(f"{k}={last[k]:.3f}" for k in keys) + f"{held}  ({trainer.run_dir})")
    return 0


def _eval(args: argparse.Namespace) -> int:
    import json

    from gigpo.envs.base import EnvError
    from gigpo.envs.registry import EnvImportError
    from gigpo.train.config import ConfigError
    from gigpo.train.evaluate import evaluate_model, format_table
    from gigpo.train.preflight.action_check import NoValidActions
    from gigpo.train.rundir.provenance import import_recorded

    overrides = list(args.overrides or [])
    if args.env:
        overrides.insert(0, f"env.name={args.env}")  # first: an env change drops the old env's options, not these
    if not args.checkpoint and not args.model:
        print("gigpo eval: error: give --checkpoint DIR or --model NAME", file=sys.stderr)
        return 2
    try:
        _import_env_modules(args)
        if args.checkpoint:
            import_recorded(args.checkpoint, getattr(args, "imports", None) or [])
        summary, batch = evaluate_model(
            args.checkpoint, model=args.model, config=args.config, overrides=overrides, episodes=args.episodes,
            temperature=args.temperature, seed=args.seed,
        )
    except (ConfigError, FileNotFoundError, ValueError, EnvError, EnvImportError, NoValidActions) as e:
        return _error("eval", e)
    print(format_table(summary))
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"summary": summary, "trajectories": [
                {"seed": t.seed, "won": t.won, "score": t.score, "length": t.length, "failed": t.failed,
                 "error": t.error, "data_source": t.data_source,
                 "steps": [{"observation": o, "response": r, "action": a, "reward": x} for o, r, a, x in t.transcript]}
                for t in batch.trajectories]}, f, indent=2)
    return 0


def _envs(args: argparse.Namespace) -> int:
    from gigpo.envs import list_envs
    from gigpo.envs.registry import EnvImportError

    try:
        _import_env_modules(args)
    except EnvImportError as e:
        return _error("envs", e)
    from gigpo.envs.registry import list_prefixes

    prefixes = list_prefixes()
    for name, spec in list_envs().items():
        if name.partition(":")[0] not in prefixes:  # resolved PREFIX:ID envs are shown by their family below
            print(f"{name:16s} {spec.description}")
    print("\nadapters (env=PREFIX:ID; docs/envs/adapters.md):")
    for prefix, fam in prefixes.items():
        needs = (f"needs {fam.package} (pip install 'gigpo[{fam.extra}]')" if fam.extra
                 else f"uses {fam.package} (a core dependency: installed with gigpo)")
        print(f"{prefix + ':ID':16s} {fam.description}; {needs}, e.g. env={fam.example}")
    return 0


def _play(args: argparse.Namespace) -> int:
    from gigpo.envs import EnvError, make
    from gigpo.envs.play import play
    from gigpo.envs.registry import EnvImportError
    from gigpo.train.config import Config, apply_overrides, env_option_error, parse_cli_overrides, validate

    try:
        _import_env_modules(args)
        # the options are checked (and typed) exactly as `gigpo train env.KEY=VALUE` checks them
        options = {f"env.{k}": v for k, v in parse_cli_overrides(args.options or []).items()}
        cfg = apply_overrides(Config(), {"env.name": args.env, **options})
        validate(cfg)
        try:
            env = make(cfg.env.name, **cfg.env.options)
        except (TypeError, ValueError) as err:
            raise env_option_error(cfg, err) from None
    except (ValueError, FileNotFoundError, EnvError, EnvImportError) as e:
        return _error("play", e)
    play(env, args.seed)
    return 0


def _serve_retriever(argv: list[str]) -> int:
    from gigpo.envs.search.server import main as serve_main

    return serve_main(argv) or 0


def build_parser() -> argparse.ArgumentParser:
    from gigpo.train.config import describe

    p = argparse.ArgumentParser(prog="gigpo", description="Train LLM agents on multi-turn environments with GiGPO.")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser(
        "train", help="train an agent (no arguments: the quickstart preset)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train with a preset or YAML file plus key=value overrides, e.g.\n"
                    "  gigpo train env=sokoban algorithm=grpo train.iterations=50\n"
                    "  gigpo train --config configs/sokoban.yaml model=smollm2-135m\n"
                    "Shorthands: env=NAME, model=NAME, algorithm=NAME set the section's name.\n"
                    "Any env.KEY=VALUE not listed below goes to the env's constructor (see `gigpo envs`).",
        epilog="configuration keys (default):\n" + describe(),
    )
    t.add_argument("--config", help="YAML file or preset name in configs/ (default: quickstart)")
    t.add_argument("--print-config", action="store_true",
                   help="print the resolved configuration (presets and overrides applied) as YAML and exit; "
                        "loads no env data and no model")
    t.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help=IMPORT_HELP)
    t.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest intact checkpoint")
    t.add_argument("--allow-config-change", action="store_true",
                   help="with --resume: accept overrides that change what is trained (env, model, algorithm, ...)")
    t.add_argument("overrides", nargs="*", metavar="key=value")
    t.set_defaults(func=_train)

    e = sub.add_parser(
        "eval", help="evaluate a checkpoint (or a model) on held-out seeds",
        epilog="With --agent openai:MODEL --base-url URL an OpenAI-compatible API is the agent "
               "(see `gigpo eval --agent openai:x --help`); with --agent oracle|random a scripted agent "
               "(see `gigpo eval --agent oracle --help`).",
    )
    e.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help=IMPORT_HELP)
    e.add_argument("--checkpoint", help="run dir (newest checkpoint), checkpoint dir, or saved model dir")
    e.add_argument("--model", help="evaluate a model by name instead (tiny, smollm2-135m, HF id/path)")
    e.add_argument("--config", help="YAML file or preset (default: the run's own config, else quickstart)")
    e.add_argument("--env", help="env name (default: the run's env)")
    e.add_argument("--episodes", type=int, default=64)
    e.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    e.add_argument("--seed", type=int, default=None,
                   help="seed of the held-out set (default: the run's train.seed). A random-init --model (tiny) "
                        "takes its weights from train.seed: `--seed S train.seed=S` reproduces the untrained "
                        "baseline (iteration 0) of a run with train.seed=S")
    e.add_argument("--output", help="write the summary and per-trajectory results (with every step) as JSON")
    e.add_argument("overrides", nargs="*", metavar="key=value")
    e.set_defaults(func=_eval)

    ls = sub.add_parser("envs", help="list the registered environments")
    ls.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help=IMPORT_HELP)
    ls.set_defaults(func=_envs)

    pl = sub.add_parser("play", help="play an env yourself in the terminal")
    pl.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help=IMPORT_HELP)
    pl.add_argument("--env", default="gridgoal")
    pl.add_argument("--seed", type=int, default=0)
    pl.add_argument("options", nargs="*", metavar="key=value", help="env constructor options")
    pl.set_defaults(func=_play)

    sub.add_parser("serve-retriever", help="serve a Search-R1-compatible /retrieve API from BM25 (see --help)",
                   add_help=False)
    sub.add_parser("sweep", help="run a grid of training runs over seeds and aggregate them (see --help)",
                   add_help=False)
    sub.add_parser("serve", help="serve a checkpoint or model over an OpenAI-compatible API (see --help)",
                   add_help=False)
    sub.add_parser("view", help="a run report in the browser: curves, per-step credit, step groups (see --help)",
                   add_help=False)
    sub.add_parser("audit", help="score estimators' credit against Monte-Carlo A* = Q - V (see --help)", add_help=False)
    return p


def _agent_arg(argv: list[str]) -> str | None:
    """The value of ``--agent`` in ``argv`` (``--agent X`` or ``--agent=X``)."""
    for i, a in enumerate(argv):
        if a.startswith("--agent="):
            return a.split("=", 1)[1]
        if a == "--agent" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _delegated(argv: list[str]) -> int | None:
    """Subcommands with their own argument parsers (each module owns its flags)."""
    if not argv:
        return None
    cmd, rest = argv[0], argv[1:]
    if cmd == "serve-retriever":
        return _serve_retriever(rest)
    if cmd == "sweep":
        from gigpo.train.sweep import sweep_main

        return sweep_main(rest)
    if cmd == "audit":
        from gigpo.audit.cli import audit_main

        return audit_main(rest)
    if cmd == "view":
        from gigpo.view.cli import view_main

        return view_main(rest)
    if cmd == "serve":
        from gigpo.serve.server import serve_main

        return serve_main(rest)
    if cmd == "eval" and any(a == "--agent" or a.startswith("--agent=") for a in rest):
        if _agent_arg(rest) in ("oracle", "random"):  # scripted agents: no model, no API
            from gigpo.train.evaluate.scripted import scripted_main

            return scripted_main(rest)
        from gigpo.serve.evaluate_api import eval_api_main

        return eval_api_main(rest)
    return None


def _format_warning(message, category, filename, lineno, line=None) -> str:  # noqa: ANN001 - warnings' hook
    """gigpo's own warnings (a deprecated config key, a skipped update) as one line, without the source line that
    Python's default adds; other packages' warnings keep the default form with their location."""
    if Path(filename).resolve().is_relative_to(Path(__file__).resolve().parent):
        return f"gigpo: {category.__name__}: {message}\n"
    return _DEFAULT_FORMAT(message, category, filename, lineno, line)


_DEFAULT_FORMAT = warnings.formatwarning


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    warnings.formatwarning = _format_warning
    try:
        return _main(argv)
    finally:  # main() called from Python (a notebook, the tests) leaves the process's warning format as it was
        warnings.formatwarning = _DEFAULT_FORMAT


def _main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    delegated = _delegated(argv)
    if delegated is not None:
        return int(delegated)
    if any(a in ("-h", "--help") for a in argv):  # --help lists the --import-ed estimators and their options
        from gigpo.envs.registry import EnvImportError, import_env_modules

        try:
            import_env_modules(_imports_in(argv))
        except EnvImportError as err:
            return _error(argv[0] if argv else "gigpo", err)
    parser = build_parser()
    # key=value after an option (`train env=x --print-config train.iterations=1`) is an override too: argparse
    # alone takes one run of positionals and calls the rest unrecognized
    args, extra = parser.parse_known_args(argv)
    stray = [a for a in extra if a.startswith("-") or "=" not in a or not hasattr(args, "overrides")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = [*(args.overrides or []), *extra]
    return int(args.func(args) or 0)


def _imports_in(argv: list[str]) -> list[str]:
    """The modules named by ``--import M`` / ``--import=M`` in ``argv`` (read before argparse, for ``--help``)."""
    out = [a.split("=", 1)[1] for a in argv if a.startswith("--import=")]
    out += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--import"]
    return out


if __name__ == "__main__":
    sys.exit(main())
