"""MySQL client/server protocol constants: capability flags, commands, status flags, types, error codes."""

from __future__ import annotations

import enum
import sys
from typing import Final

MAX_PACKET: Final = 0xFFFFFF  # a payload of this length continues in the next packet


class Cap(enum.IntFlag):
    """Capability flags exchanged in the handshake."""

    LONG_PASSWORD = 1
    FOUND_ROWS = 1 << 1
    LONG_FLAG = 1 << 2
    CONNECT_WITH_DB = 1 << 3
    NO_SCHEMA = 1 << 4
    COMPRESS = 1 << 5
    ODBC = 1 << 6
    LOCAL_FILES = 1 << 7
    IGNORE_SPACE = 1 << 8
    PROTOCOL_41 = 1 << 9
    INTERACTIVE = 1 << 10
    SSL = 1 << 11
    IGNORE_SIGPIPE = 1 << 12
    TRANSACTIONS = 1 << 13
    RESERVED = 1 << 14
    SECURE_CONNECTION = 1 << 15
    MULTI_STATEMENTS = 1 << 16
    MULTI_RESULTS = 1 << 17
    PS_MULTI_RESULTS = 1 << 18
    PLUGIN_AUTH = 1 << 19
    CONNECT_ATTRS = 1 << 20
    PLUGIN_AUTH_LENENC_DATA = 1 << 21
    CAN_HANDLE_EXPIRED_PASSWORDS = 1 << 22
    SESSION_TRACK = 1 << 23
    DEPRECATE_EOF = 1 << 24


#: What the proxy offers clients and asks of backends. Both sides use one packet format (classic EOF packets,
#: no session tracking, no compression) so that backend responses are relayed to clients byte for byte.
PROXY_CAPABILITIES = (
    Cap.LONG_PASSWORD
    | Cap.FOUND_ROWS
    | Cap.LONG_FLAG
    | Cap.CONNECT_WITH_DB
    | Cap.LOCAL_FILES
    | Cap.PROTOCOL_41
    | Cap.TRANSACTIONS
    | Cap.SECURE_CONNECTION
    | Cap.MULTI_STATEMENTS
    | Cap.MULTI_RESULTS
    | Cap.PS_MULTI_RESULTS
    | Cap.PLUGIN_AUTH
    | Cap.CONNECT_ATTRS
    | Cap.PLUGIN_AUTH_LENENC_DATA
    | Cap.IGNORE_SPACE
    | Cap.INTERACTIVE
)

#: The client's flags that change what its session means on the server: affected rows counting matched rows
#: (FOUND_ROWS), IGNORE_SPACE in its sql_mode, interactive_timeout as its wait_timeout (INTERACTIVE), whether a
#: procedure may return result sets (MULTI_RESULTS, PS_MULTI_RESULTS). A backend connection is opened with the
#: session's own and serves only sessions with the same (``Credentials.flags``), as ProxySQL keeps them apart.
SESSION_CAPABILITIES: Final = int(
    Cap.FOUND_ROWS | Cap.IGNORE_SPACE | Cap.INTERACTIVE | Cap.MULTI_RESULTS | Cap.PS_MULTI_RESULTS
)
#: What the proxy's own connections (the monitor, KILL, the XA coordinator) ask of those: what libmysqlclient asks.
DEFAULT_SESSION_FLAGS: Final = int(Cap.MULTI_RESULTS | Cap.PS_MULTI_RESULTS)


class Command(enum.IntEnum):
    """Command bytes: the first byte of every client command packet."""

    SLEEP = 0x00
    QUIT = 0x01
    INIT_DB = 0x02
    QUERY = 0x03
    FIELD_LIST = 0x04
    CREATE_DB = 0x05
    DROP_DB = 0x06
    REFRESH = 0x07
    SHUTDOWN = 0x08
    STATISTICS = 0x09
    PROCESS_INFO = 0x0A
    CONNECT = 0x0B
    PROCESS_KILL = 0x0C
    DEBUG = 0x0D
    PING = 0x0E
    TIME = 0x0F
    DELAYED_INSERT = 0x10
    CHANGE_USER = 0x11
    BINLOG_DUMP = 0x12
    TABLE_DUMP = 0x13
    CONNECT_OUT = 0x14
    REGISTER_SLAVE = 0x15
    STMT_PREPARE = 0x16
    STMT_EXECUTE = 0x17
    STMT_SEND_LONG_DATA = 0x18
    STMT_CLOSE = 0x19
    STMT_RESET = 0x1A
    SET_OPTION = 0x1B
    STMT_FETCH = 0x1C
    DAEMON = 0x1D
    BINLOG_DUMP_GTID = 0x1E
    RESET_CONNECTION = 0x1F


class Status(enum.IntFlag):
    """Server status flags carried by OK and EOF packets."""

    IN_TRANS = 0x0001
    AUTOCOMMIT = 0x0002
    MORE_RESULTS_EXISTS = 0x0008
    NO_GOOD_INDEX_USED = 0x0010
    NO_INDEX_USED = 0x0020
    CURSOR_EXISTS = 0x0040
    LAST_ROW_SENT = 0x0080
    DB_DROPPED = 0x0100
    NO_BACKSLASH_ESCAPES = 0x0200
    METADATA_CHANGED = 0x0400
    QUERY_WAS_SLOW = 0x0800
    PS_OUT_PARAMS = 0x1000
    IN_TRANS_READONLY = 0x2000
    SESSION_STATE_CHANGED = 0x4000


class FieldType(enum.IntEnum):
    """Column types used in the result sets the proxy builds itself."""

    DECIMAL = 0x00
    TINY = 0x01
    SHORT = 0x02
    LONG = 0x03
    FLOAT = 0x04
    DOUBLE = 0x05
    NULL = 0x06
    TIMESTAMP = 0x07
    LONGLONG = 0x08
    INT24 = 0x09
    DATE = 0x0A
    TIME = 0x0B
    DATETIME = 0x0C
    YEAR = 0x0D
    VARCHAR = 0x0F
    BIT = 0x10
    NEWDECIMAL = 0xF6
    BLOB = 0xFC
    VAR_STRING = 0xFD
    STRING = 0xFE


class ErrorCode(enum.IntEnum):
    """Error numbers the proxy sends itself, with the MySQL/ProxySQL meaning they carry."""

    CON_COUNT = 1040  # too many connections
    HOST_IS_BLOCKED = 1129  # too many failed logins from the client's address
    HANDSHAKE = 1043  # bad handshake
    DB_ACCESS_DENIED = 1044
    ACCESS_DENIED = 1045
    NO_DB = 1046
    UNKNOWN_COM = 1047
    BAD_DB = 1049
    NET_PACKET_TOO_LARGE = 1153
    NET_READ = 1158
    PACKETS_OUT_OF_ORDER = 1156
    LOCAL_INFILE_DISABLED = 4166  # MariaDB's ER_LOAD_INFILE_CAPABILITY_DISABLED
    QUERY_INTERRUPTED = 1317
    LOCK_WAIT_TIMEOUT = 1205  # a hot-row queue's wait timed out, or its line is full
    LOCK_DEADLOCK = 1213  # a hot-row queue's key out of order, held by a transaction waiting for this one
    UNKNOWN_STMT_HANDLER = 1243
    WRONG_ARGUMENTS = 1210  # a prepared statement's parameters that cannot be read
    NOT_SUPPORTED = 1235  # ER_NOT_SUPPORTED_YET: a statement the proxy does not carry out
    NO_SUCH_THREAD = 1094  # KILL of an id no session has
    KILL_DENIED = 1095  # KILL of another user's session
    CONNECTION_KILLED = 1927  # MariaDB's answer to a KILL of one's own connection
    CLIENT_INTERACTION_TIMEOUT = 4031  # a session idle past its wait_timeout (MySQL 8.0.24+, MariaDB 11)
    ERROR_ON_WRITE = 1026  # a file of the proxy's own (the XA decision log) cannot be written
    ERROR_DURING_COMMIT = 1180  # a transaction over shards that could not commit (never an XA error: see sharding.xa)
    BACKEND_LOST = 2013
    SSL_CONNECTION = 2026  # CR_SSL_CONNECTION_ERROR: TLS with a backend failed
    PROXY_ERROR = 9001  # ProxySQL's "Max connect timeout reached while reaching hostgroup N" family
    HOSTGROUP_LOCKED = 9006
    RULE_BLOCKED = 1148  # ProxySQL's default errno for error_msg rules


#: SQLSTATE for each error code the proxy emits; unknown codes get HY000.
SQLSTATE = {
    ErrorCode.CON_COUNT: "08004",
    ErrorCode.HOST_IS_BLOCKED: "HY000",
    ErrorCode.HANDSHAKE: "08S01",
    ErrorCode.ACCESS_DENIED: "28000",
    ErrorCode.NO_DB: "3D000",
    ErrorCode.UNKNOWN_COM: "08S01",
    ErrorCode.BAD_DB: "42000",
    ErrorCode.NET_PACKET_TOO_LARGE: "08S01",
    ErrorCode.NET_READ: "08S01",
    ErrorCode.PACKETS_OUT_OF_ORDER: "08S01",
    ErrorCode.QUERY_INTERRUPTED: "70100",
    ErrorCode.LOCK_WAIT_TIMEOUT: "HY000",
    ErrorCode.LOCK_DEADLOCK: "40001",
    ErrorCode.UNKNOWN_STMT_HANDLER: "HY000",
    ErrorCode.NOT_SUPPORTED: "42000",
    ErrorCode.CONNECTION_KILLED: "70100",
    ErrorCode.BACKEND_LOST: "HY000",
    ErrorCode.RULE_BLOCKED: "42000",
    ErrorCode.ERROR_DURING_COMMIT: "HY000",
}

#: Character set ids of the collations the proxy names itself (id -> (charset, collation)).
COLLATIONS = {
    8: ("latin1", "latin1_swedish_ci"),
    33: ("utf8mb3", "utf8mb3_general_ci"),
    45: ("utf8mb4", "utf8mb4_general_ci"),
    46: ("utf8mb4", "utf8mb4_bin"),
    63: ("binary", "binary"),
    224: ("utf8mb4", "utf8mb4_unicode_ci"),
    255: ("utf8mb4", "utf8mb4_0900_ai_ci"),
}
DEFAULT_COLLATION_ID = 45

# Clients of MySQL 8 ask for utf8mb4_0900_ai_ci (255), which MariaDB lacks: use utf8mb4's default there.
_COLLATION_FALLBACK = {255: DEFAULT_COLLATION_ID}


def names_for_collation(collation_id: int) -> str:
    """The ``SET NAMES`` argument matching a handshake's collation id."""
    collation_id = _COLLATION_FALLBACK.get(collation_id, collation_id)
    charset, collation = COLLATIONS.get(collation_id, COLLATIONS[DEFAULT_COLLATION_ID])
    return sys.intern(f"{charset} COLLATE {collation}")  # one object per collation, as ``packets.schema_name``
