//! Redis RDB and DUMP payload formats.
