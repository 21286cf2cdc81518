"""DeerFlow's sandbox tools (``ls_tool``, ``read_file_tool``, ``write_file_tool``,
``str_replace_tool``, ``glob_tool``, ``grep_tool``, ``bash_tool``), run by toolhost: the same
objects as ``toolhost.deerflow:<name>``."""

import toolhost.deerflow as _door


def __getattr__(variable: str):
    return getattr(_door, variable)
