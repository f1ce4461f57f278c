# SPDX-License-Identifier: MIT
"""cupy.cuda: the allocator hook, the current stream, the device."""
from . import memory, runtime  # noqa: F401


class Stream:
    def __init__(self, ptr):
        self.ptr = ptr


current = Stream(0)  # tests set current.ptr


def get_current_stream():
    return current


def set_allocator(allocator=None):
    memory.allocator = allocator


def get_allocator():
    return memory.allocator
