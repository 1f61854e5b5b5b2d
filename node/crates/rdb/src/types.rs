//! RDB type codes and opcodes (Redis 7.0 rdb.h, plus the 7.2 / Valkey 8 additions).

pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_MODULE_PRE_GA: u8 = 6;
pub const TYPE_MODULE_2: u8 = 7;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;
pub const TYPE_SET_LISTPACK: u8 = 20;
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;

pub const OPCODE_SLOT_INFO: u8 = 244;
pub const OPCODE_FUNCTION2: u8 = 245;
pub const OPCODE_FUNCTION_PRE_GA: u8 = 246;
pub const OPCODE_MODULE_AUX: u8 = 247;
pub const OPCODE_IDLE: u8 = 248;
pub const OPCODE_FREQ: u8 = 249;
pub const OPCODE_AUX: u8 = 250;
pub const OPCODE_RESIZEDB: u8 = 251;
pub const OPCODE_EXPIRETIME_MS: u8 = 252;
pub const OPCODE_EXPIRETIME: u8 = 253;
pub const OPCODE_SELECTDB: u8 = 254;
pub const OPCODE_EOF: u8 = 255;

pub(crate) const QUICKLIST_NODE_PLAIN: u64 = 1;
pub(crate) const QUICKLIST_NODE_PACKED: u64 = 2;

/// A readable name for the value types we know of but do not load (for error messages;
/// streams are loaded, their name stays for completeness).
pub(crate) fn type_name(code: u8) -> Option<&'static str> {
    Some(match code {
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => "stream",
        TYPE_MODULE_PRE_GA | TYPE_MODULE_2 => "module",
        22..=25 => "hash with field expiry",
        _ => return None,
    })
}
