"""python -m plugboard_dsl NAME --nranks N [--channel memory|port] -o plan.json

Writes the plan of a shipped program (plugboard_dsl.programs.SHIPPED), or
of a program file's make(nranks, channel) with --file."""
import argparse
import importlib.util
import sys

from .program import ValidationError
from .programs import SHIPPED


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m plugboard_dsl", description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?", help="a shipped program: " + ", ".join(sorted(SHIPPED)))
    ap.add_argument("--file", help="a Python file defining make(nranks, channel) -> Program")
    ap.add_argument("--nranks", type=int, required=True)
    ap.add_argument("--channel", choices=("memory", "port"), default="memory")
    ap.add_argument("-o", "--output", required=True, help="the plan's JSON file")
    a = ap.parse_args(argv)
    try:
        if a.file:
            spec = importlib.util.spec_from_file_location("plugboard_user_program", a.file)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            program = module.make(a.nranks, a.channel)
        elif a.name in SHIPPED:
            program = SHIPPED[a.name](a.nranks, a.channel)
        else:
            ap.error(f"no program {a.name!r}; shipped: {', '.join(sorted(SHIPPED))} (or give --file)")
        program.write(a.output)
    except ValidationError as e:
        print(f"plugboard_dsl: {e}", file=sys.stderr)
        return 1
    print(f"plugboard_dsl: wrote {a.output} ({program.name}, {a.nranks} ranks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
