"""The documented exit codes shared by every ``soklet`` command."""

import enum


class ExitCode(enum.IntEnum):
    """Process exit statuses. Each command's ``--help`` lists the ones it uses."""

    OK = 0
    #: The input or the change was refused (bad JSON, a keyring rule, a state that would not open).
    REFUSED = 1
    #: The command line itself is wrong (an unknown option, a missing one, a value outside its bounds).
    USAGE = 2
    #: A file, permission or other I/O problem, including an output that cannot be written (a closed stdout, a
    #: full disk). A reader that goes away (``soklet … | head``) is not one: the command ends quietly, 0 unless it
    #: had failed, as ``git log | head`` does.
    IO = 3
    #: No key in the keyring can open the state.
    NO_KEY = 4
    #: The thing named (a task id) does not exist.
    NOT_FOUND = 5
    #: A bug in soklet: reported in one line, never as a traceback.
    INTERNAL = 70
