"""A checkpoint-friendly run without a framework (docs/scheduling.md: checkpoints).

It counts steps, saves a checkpoint atomically to a drive on SIGTERM and every
few steps, and resumes from the latest checkpoint when it starts again:

    astra run --name demo --drive checkpoints:/ckpt --time-limit 1h -- \
        python3 /ckpt/code/train.py --steps 1000

Environment: CKPT_DIR (default /ckpt), SLURM_JOB_NAME (the run's name).
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument("--save-every", type=int, default=50)
    args = parser.parse_args()
    ckpt_dir = os.path.join(
        os.environ.get("CKPT_DIR", "/ckpt"), os.environ.get("SLURM_JOB_NAME", "run")
    )
    ckpt = os.path.join(ckpt_dir, "latest.json")

    def save(step: int) -> None:
        os.makedirs(ckpt_dir, exist_ok=True)
        tmp = ckpt + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"step": step}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, ckpt)  # atomic: a kill mid-save keeps the previous one

    start = 0
    if os.path.exists(ckpt):
        with open(ckpt) as f:
            start = json.load(f)["step"] + 1
        print(f"resuming from step {start}", flush=True)
    for step in range(start, args.steps):
        time.sleep(args.step_seconds)  # one training step
        print(f"step {step}", flush=True)
        if stop.is_set():
            save(step)
            print(f"SIGTERM: saved step {step}, exiting", flush=True)
            return 0
        if step % args.save_every == 0:
            save(step)
    save(args.steps - 1)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
