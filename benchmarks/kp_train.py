"""The known positive's LoRA training and held-out diagnostic: this commit's code against an earlier one's.

    python benchmarks/kp_train.py [--old 87bd12c] [--rounds 2] [--threads 1]

Both arms train the integration test's spec (12 training directions, 2 epochs, batch 6) on the
embedded model and score its 8 held-out directions, in one process, rounds rotated (``_harness``).
The old arm is ``owmi/controls/known_positive.py`` as it was at ``--old`` (read with ``git show``
into a temporary module; it imports today's package for everything else). Printed: time per arm,
the ratio, and each arm's first and last loss and held-out hits (they must agree to float rounding).
"""

from __future__ import annotations

import importlib.util
import subprocess
import tempfile
from pathlib import Path

from _harness import Arm, compare, parser, report, single_thread

PATH = "src/tamperbench/owmi/controls/known_positive.py"


def old_module(commit: str):
    root = Path(__file__).resolve().parents[1]
    text = subprocess.run(["git", "show", f"{commit}:{PATH}"], cwd=root, check=True, capture_output=True,
                          text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="kp-old-")) / "kp_old.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("kp_old", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = parser(__doc__, rounds=2)
    ap.add_argument("--old", default="87bd12c", help="the commit whose known_positive.py is the baseline")
    args = ap.parse_args()
    single_thread(args.threads)
    import tamperbench.owmi.controls.known_positive as new
    from tamperbench.models import load_backend

    old = old_module(args.old)
    backend = load_backend("embedded", device="cpu")
    spec = new.KnownPositiveSpec(train_seeds=(500000, 500011), heldout_seeds=(900000, 900007), epochs=2)
    seen: dict[str, tuple] = {}

    def arm(name: str, module):
        def run() -> None:
            model, rec = module.train(backend, spec)
            res = module.evaluate(backend, spec, model, rec, n_boot=50)
            seen[name] = (rec["loss_first"], rec["loss_last"], res["hits"], res["false_alarms"])
        return run

    result = compare([Arm(f"at {args.old}", arm("old", old)), Arm("this commit", arm("new", new))],
                     rounds=args.rounds, warmup=False)
    report(result)
    for name, (first, last, hits, fa) in seen.items():
        print(f"{name}: loss {first:.7f} -> {last:.7f}; held-out hits {hits}/8, false alarms {fa}/8")


if __name__ == "__main__":
    main()
