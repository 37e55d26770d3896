"""The command line, ``python -m dragoman ...``, as one package.

``commands`` parses the command line and runs ``run``/``demo``/``fake-upstream`` itself; ``record_cmd`` (record,
replay), ``env_cmd`` (env) and ``dragoman.ledger.report`` (usage) add their own subcommands; ``common`` holds what
they share (mitmdump's command line); ``env_recipes`` the client environments and interception recipes. Nothing
outside this package imports it but ``dragoman.__main__`` and the tests.
"""

from dragoman.cli.commands import main
from dragoman.cli.common import build_mitmdump_argv
from dragoman.cli.common import entry_script
from dragoman.cli.record_cmd import build_record_argv
from dragoman.cli.record_cmd import build_replay_argv
from dragoman.cli.record_cmd import dead_port
from dragoman.cli.record_cmd import describe_replay

__all__ = [
    "build_mitmdump_argv",
    "build_record_argv",
    "build_replay_argv",
    "dead_port",
    "describe_replay",
    "entry_script",
    "main",
]
