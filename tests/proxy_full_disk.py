"""``lab proxy`` whose disk fills up on cue: ``python -m tests.proxy_full_disk FLAG ARGS...``
runs ``lab.cli.main(ARGS)`` with journal writes and Parquet part writes refused with
``ENOSPC`` once the file ``FLAG`` exists (as ``tests/test_disk_full.py``'s ``Disk`` does in
process), and exits with its exit status. For the exit-code test of
``tests/test_proxy_limits.py``."""

from __future__ import annotations

import errno
import os
import sys


def main() -> int:
    import pyarrow.parquet as pq

    flag, argv = sys.argv[1], sys.argv[2:]
    real_write, real_writev, real_table = os.write, os.writev, pq.write_table

    def full() -> bool:
        return os.path.exists(flag)

    def journal(fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").endswith(".journal")
        except OSError:
            return False

    def refuse() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def write(fd, data):
        if full() and journal(fd):
            refuse()
        return real_write(fd, data)

    def writev(fd, buffers):
        if full() and journal(fd):
            refuse()
        return real_writev(fd, buffers)

    def write_table(table, where, *args, **kwargs):
        if full():
            refuse()
        return real_table(table, where, *args, **kwargs)

    os.write, os.writev, pq.write_table = write, writev, write_table
    from lab.cli import main as lab_main

    return lab_main(argv)


if __name__ == "__main__":
    sys.exit(main())
