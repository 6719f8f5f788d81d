"""Progress lines of the sampler benchmark, on stderr so that stdout holds only the table."""
import sys


def log(msg: str) -> None:
    """Print ``[bench] msg`` to stderr at once."""
    print(f"[bench] {msg}", file=sys.stderr, flush=True)
