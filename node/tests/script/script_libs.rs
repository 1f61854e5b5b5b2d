//! The `cmsgpack` and `struct` Lua libraries, differential against redis-server 7.0: the
//! same EVAL (and FCALL) run on both servers must give identical replies (packed bytes come
//! back as bulk strings, errors with their exact text).

use tessera_testkit::diff::*;

/// tessera-node and redis-server (a missing redis-server fails the test).
fn pair() -> (Server, Server) {
    let t = Server::tessera(&[]);
    let r = Server::redis(&["--save", "", "--appendonly", "no"]);
    (t, r)
}

/// One command with binary arguments.
fn cmd_bin(c: &mut Conn, args: &[&[u8]]) -> Reply {
    let mut b = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        b.extend_from_slice(a);
        b.extend_from_slice(b"\r\n");
    }
    c.raw_write(&b);
    c.read()
}

/// Runs each script (numkeys 0) on both servers and asserts identical replies.
fn diff_scripts(scripts: &[&str]) {
    let (t, r) = pair();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    for s in scripts {
        let (x, y) = (a.cmd(&["EVAL", s, "0"]), b.cmd(&["EVAL", s, "0"]));
        assert_eq!(x, y, "script {s:?}\ntessera: {x:?}\nredis:   {y:?}");
    }
}

const CMSGPACK: &[&str] = &[
    "return type(cmsgpack)",
    "return cmsgpack.pack(0,127,128,255,256,65535,65536,4294967295,4294967296,2^53)",
    "return cmsgpack.pack(-1,-32,-33,-128,-129,-32768,-32769,-2147483648,-2147483649,-2^63)",
    "return {cmsgpack.unpack(cmsgpack.pack(0,127,128,255,256,65535,65536,4294967295,4294967296,-1,-32,-33,-128,-129,-32768,-32769,-2147483648,-2147483649))}",
    "return cmsgpack.pack(1.5, 0.1, -0.0, 1/0, -1/0, 2^63, 2^64, 1e300)",
    "return cmsgpack.pack('', string.rep('x',31), string.rep('x',32))",
    "return cmsgpack.pack(string.rep('x',255), string.rep('x',256))",
    "return cmsgpack.pack(string.rep('x',65535)):sub(1,8)",
    "return cmsgpack.pack(string.rep('x',65536)):sub(1,8)",
    "local s = string.rep('y',65536); return cmsgpack.unpack(cmsgpack.pack(s)) == s",
    "return cmsgpack.pack({1,2,3},{a=1},{},{[1]=1,[3]=3},{[1.5]=1},{true,false,nil,4})",
    "return cmsgpack.pack({1,{2,{3,{x={y='z'}}}}}, {[-1]=1}, {[2^31]=1}, {[1]=1,[2]=2,n=2})",
    "return cmsgpack.pack({{{{{{{{{{{{{{{{{{{{1}}}}}}}}}}}}}}}}}}}})",
    "return cmsgpack.pack(function() end, nil, true, false, redis.call)",
    "return cmsgpack.pack(string.rep('a', 20), {string.rep('b', 20)})",
    "return {cmsgpack.unpack(cmsgpack.pack(1, 'ab', {3, {k='v'}}, true, false))}",
    "return tostring(cmsgpack.unpack(cmsgpack.pack(1.5)))",
    "return tostring(cmsgpack.unpack(cmsgpack.pack(0.1)))",
    "return tostring(cmsgpack.unpack('\\203\\127\\248\\0\\0\\0\\0\\0\\0'))",
    "return cmsgpack.unpack('\\202\\127\\192\\0\\0')",
    "return {cmsgpack.unpack('\\130\\1\\2\\1\\3')}",
    "return {cmsgpack.unpack('\\147\\1\\192\\3')}",
    "return {cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255')}",
    "return {cmsgpack.unpack('\\211\\128\\0\\0\\0\\0\\0\\0\\0')}",
    "return {cmsgpack.unpack('\\220\\0\\2\\1\\2', '\\222\\0\\1\\1\\2')}",
    "return {cmsgpack.unpack('')}",
    "return {cmsgpack.unpack(5)}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1,'ab',{3}))}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1,'ab',{3}), 1)}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1,'ab',{3}), 4)}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1,'ab',{3}), 6)}",
    "return {cmsgpack.unpack_one('')}",
    "return {cmsgpack.unpack_one('\\1', '0')}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1,'ab',{3}), 2)}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1,'ab',{3}), 2, 1)}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1,'ab',{3}), 1, 6)}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', 0)}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', 0, 1)}",
    "return #{cmsgpack.unpack(string.rep('\\1', 5000))}",
    "return #{cmsgpack.unpack(string.rep('\\1', 7998))}",
    "return #{cmsgpack.unpack(string.rep('\\145', 3999)..'\\1')}",
    "return #{cmsgpack.unpack(string.rep('\\129\\1', 3998)..'\\1')}",
    // errors
    "return cmsgpack.pack()",
    "return cmsgpack.unpack()",
    "return cmsgpack.unpack({})",
    "return {pcall(cmsgpack.unpack, '\\218\\0')}",
    "return {cmsgpack.unpack('\\196\\1a')}",
    "return {cmsgpack.unpack('\\199\\1\\1a')}",
    "return {cmsgpack.unpack('\\193')}",
    "return cmsgpack.unpack('\\218\\0')",
    "return cmsgpack.unpack('\\165abc')",
    "return cmsgpack.unpack('\\205\\1')",
    "return cmsgpack.unpack('\\220\\0\\2\\1')",
    "return cmsgpack.unpack('\\221\\255\\255\\255\\255\\1')",
    "return cmsgpack.unpack('\\223\\255\\255\\255\\255\\1')",
    "return cmsgpack.unpack('\\129\\192\\1')",
    "return cmsgpack.unpack('\\129\\202\\127\\192\\0\\0\\1')",
    "return {cmsgpack.unpack_one('\\1\\2', -1)}",
    "return {cmsgpack.unpack_one('\\1\\2', 5)}",
    "return {cmsgpack.unpack_one('\\1', 'x')}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3')}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', -1)}",
    "return cmsgpack.unpack(string.rep('\\145', 10000))",
    "return #{cmsgpack.unpack(string.rep('\\145', 4000)..'\\1')}",
    "return #{cmsgpack.unpack(string.rep('\\1', 10000))}",
    "return #{cmsgpack.unpack(string.rep('\\129', 5000)..'\\1')}",
    "return #{cmsgpack.unpack(string.rep('\\144', 6000))}",
    "return #{cmsgpack.unpack(string.rep('\\161x', 6000))}",
    "local t = {} for i=1,20 do t['k'..i]=i end return cmsgpack.pack(t)",
    "local t = {} for i=1,70000 do t[i]=i end return cmsgpack.pack(t):sub(1,8)",
    "local t = {} for i=1,70000 do t['k'..i]=i end local p = cmsgpack.pack(t) return {p:sub(1,8), #p}",
    "local t = {} for i=1,70000 do t['k'..i]=i end local u = cmsgpack.unpack(cmsgpack.pack(t)) return u.k69999",
    "return cmsgpack.pack(-1.5, -0.25, 1e-300, 3.4028234663852886e38, 3.5e38, 16777217, 2^24+0.5)",
    "return cmsgpack.pack({[1]=1, [2]=2, [4]=4})",
    "return cmsgpack.pack({[1]=1, [2]=nil, [3]=3})",
    "return cmsgpack.pack({n=1, 1})",
    "return cmsgpack.pack({[true]=1})",
    "return cmsgpack.pack({[{}]=1})",
    "return {cmsgpack.unpack('\\129\\145\\1\\2')}",
    "return {cmsgpack.unpack_one('\\1\\2\\3', 3)}",
    "return {cmsgpack.unpack_one('\\1\\2\\3', 2.9)}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', 1.5)}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', '2')}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', 2^32+1)}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', 2^31)}",
    "return {cmsgpack.unpack_one('\\1\\2\\3', nil)}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', 2, nil)}",
    "return {cmsgpack.unpack('\\1', '\\2')}",
    "return {cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION}",
    "return cmsgpack.unpack('\\130\\1\\2\\1')",
    "return {pcall(cmsgpack.unpack_one, 'a', -1)}",
    "return {pcall(cmsgpack.pack)}",
    "local p = cmsgpack.pack; return p()",
    "cmsgpack.pack = nil",
    "cmsgpack.x = 1",
];

#[test]
fn cmsgpack_matches_redis() {
    diff_scripts(CMSGPACK);
}

const STRUCT: &[&str] = &[
    "return struct.pack('>iIhHbBlLT', -1, 2, -3, 4, -5, 6, -7, 8, 9)",
    "return struct.pack('<iIhHbBlLT', -1, 2, -3, 4, -5, 6, -7, 8, 9)",
    "return {struct.unpack('>iIhHbBlLT', struct.pack('>iIhHbBlLT', -1, 2, -3, 4, -5, 6, -7, 8, 9))}",
    "return struct.pack('!4 b i b d', 1, 2, 3, 4.5)",
    "return struct.pack('!16 b d', 1, 2)",
    "return struct.pack('!2 b i', 1, 2)",
    "return struct.size('!4 b i b d')",
    "return struct.size('!b d')",
    "return struct.size('! b d c3 i3')",
    "return struct.size('z')",
    "return struct.size(5)",
    "return {struct.unpack('b c0 x', '\\3abcd')}",
    "return {struct.unpack('s s', 'ab\\0cd\\0')}",
    "return {struct.unpack('c2 c1', 'abc')}",
    "return {struct.unpack('b', 'xyz', 2)}",
    "return tostring(struct.unpack('<f', struct.pack('<f', 1.5)))",
    "return tostring(struct.unpack('>d', struct.pack('>d', 1.25)))",
    "return struct.pack('>f<d', 0.1, 0.1)",
    "return struct.pack('s', 'abc')",
    "return struct.pack('c0', 'abc')",
    "return struct.pack('c2', 'abc')",
    "return struct.pack('x x b', 7)",
    "return struct.pack('>i3', -2)",
    "return {struct.unpack('>i3', '\\255\\255\\254')}",
    "return {struct.unpack('<i9', '\\255\\255\\255\\255\\255\\255\\255\\255\\255')}",
    "return {struct.unpack('<I9', '\\255\\255\\255\\255\\255\\255\\255\\255\\1')}",
    "return {struct.unpack('i0', '')}",
    "return struct.pack('i0', 1)",
    "return struct.pack('!', 1)",
    "return struct.pack('>I16', -1)",
    "return struct.pack('<I8', 1e20)",
    "return struct.pack('<I8', 0/0)",
    "return struct.pack('<i8', -1e20)",
    "return struct.pack('<i2', '300')",
    "return struct.pack('b\\0b', 1, 2)",
    // errors
    "return struct.pack('=i', 1)",
    "return struct.pack('z', 1)",
    "return struct.size('s')",
    "return struct.size('c0')",
    "return struct.size('=')",
    "return struct.pack('i', 'x')",
    "return struct.pack('i', {})",
    "return {struct.unpack('i', 'abcd', 0)}",
    "return {struct.unpack('i', 'abcd', 2)}",
    "return {struct.unpack('i', 'abcd', 5)}",
    "return {struct.unpack('i', 'abcd', 6)}",
    "return struct.pack('i33', 1)",
    "return struct.pack('!3i', 1)",
    "return struct.pack('i99999999999', 1)",
    "return {struct.unpack('c0', 'abc')}",
    "return {struct.unpack('b c0', '\\9abc')}",
    "return {struct.unpack('s', 'abc')}",
    "return struct.pack('c5', 'abc')",
    "return struct.pack()",
    "return struct.unpack('i')",
    "return struct.size()",
    "return {pcall(struct.pack, 'q')}",
    "return select('#', struct.unpack(string.rep('s', 6000), string.rep('\\0', 6000)))",
    "return struct.pack('<bBhH', 300, -1, 70000, -2)",
    "return struct.pack('<lLT', 2^53, -0.5, 1.9)",
    "return struct.pack('<i', 2^31)",
    "return struct.pack('<I', 2^33 + 5)",
    "return struct.pack('<i1i2i3i4i5i6i7i8', -1, -2, -3, -4, -5, -6, -7, -8)",
    "return {struct.unpack('<i1i2i3i4i5i6i7i8', struct.pack('<i1i2i3i4i5i6i7i8', -1, -2, -3, -4, -5, -6, -7, -8))}",
    "return {struct.unpack('!8 b d b i h', struct.pack('!8 b d b i h', 1, 2.5, 3, 4, 5))}",
    "return {struct.unpack('!2 b d', struct.pack('!2 b d', 1, 2.5))}",
    "return struct.size('!8 b d b i h')",
    "return struct.size('!8 c3 d')",
    "return struct.size('x!4 i')",
    "return struct.pack('b', '12')",
    "return struct.pack('b', '0x10')",
    "return struct.pack('c', 'xy')",
    "return {struct.unpack('', 'abc')}",
    "return {struct.unpack('', 'abc', 4)}",
    "return {struct.unpack('b', 'abc', '2')}",
    "return {struct.unpack('b', 'abc', 2.7)}",
    "return {struct.unpack('I3', 12345)}",
    "return struct.pack('i', 1, 2, 3)",
    "return struct.pack('c', '')",
    "return {struct.unpack('c', '')}",
    "return {struct.unpack('', 'abc', 5)}",
    "return struct.pack(12, 1)",
    "return {pcall(struct.size, 's')}",
    "return {pcall(struct.unpack, 'i', 'a')}",
    "return {struct.unpack('b', 'abc', -1)}",
    "return {struct.unpack('b c0', '\\255abc')}",
    "return {struct.unpack('d c0', struct.pack('d', 1.5)..'ab')}",
    "struct.pack = nil",
];

#[test]
fn struct_matches_redis() {
    diff_scripts(STRUCT);
}

/// A random Lua expression for a value cmsgpack packs (ints at encoding boundaries, floats,
/// strings around length boundaries, booleans, nil holes, nested arrays and maps).
fn lua_value(rng: &mut Rng, depth: u32) -> String {
    const INTS: &[i64] = &[
        0,
        1,
        127,
        128,
        255,
        256,
        65535,
        65536,
        4294967295,
        4294967296,
        -1,
        -32,
        -33,
        -128,
        -129,
        -32768,
        -32769,
        -2147483648,
        -2147483649,
    ];
    match rng.below(if depth > 3 { 6 } else { 9 }) {
        0 => INTS[rng.below(INTS.len() as u64) as usize].to_string(),
        1 => format!("{}", rng.next() as i64 >> rng.below(64)),
        2 => format!("{:?}", (rng.next() as i64 >> 20) as f64 / 1024.0),
        3 => format!(
            "string.rep('s', {})",
            [0, 1, 31, 32, 255, 256, 300][rng.below(7) as usize]
        ),
        4 => ["true", "false", "nil"][rng.below(3) as usize].to_string(),
        5 => format!("'k{}'", rng.below(1000)),
        6 | 7 => {
            let n = rng.below(20);
            let items: Vec<String> = (0..n).map(|_| lua_value(rng, depth + 1)).collect();
            format!("{{{}}}", items.join(", "))
        }
        _ => {
            let n = rng.below(6);
            let items: Vec<String> = (0..n)
                .map(|i| format!("['f{i}'] = {}", lua_value(rng, depth + 1)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

#[test]
fn cmsgpack_random_round_trip() {
    let (t, r) = pair();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for i in 0..300 {
        let v = lua_value(&mut rng, 0);
        let s = format!(
            "local v = {v}; local p = cmsgpack.pack(v, v); \
             return {{p, cmsgpack.pack({{cmsgpack.unpack(p)}}), cmsgpack.unpack_one(p, 0)}}"
        );
        let (x, y) = (a.cmd(&["EVAL", &s, "0"]), b.cmd(&["EVAL", &s, "0"]));
        assert_eq!(x, y, "case {i}: {s}");
    }
}

#[test]
fn cmsgpack_fuzz_never_crashes() {
    let (t, r) = pair();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    // Results (or the error) re-packed, so that replies compare byte for byte.
    let script = b"local r = {pcall(cmsgpack.unpack, ARGV[1])} \
        if not r[1] then return 'E:' .. tostring(r[2]) end \
        table.remove(r, 1) return cmsgpack.pack(r)";
    // Markers biased to containers and lengths so inputs go deeper than pure noise.
    const MARKERS: &[u8] = &[
        0x91, 0x92, 0x81, 0x82, 0xdc, 0xdd, 0xde, 0xdf, 0xd9, 0xda, 0xdb, 0xa3, 0xc0, 0xc2, 0xc3,
        0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd3, 0xc4, 0xc7, 0xd4, 0x00, 0xff,
    ];
    let mut rng = Rng(0xf022_5eed_0000_0042);
    for i in 0..3000 {
        let n = rng.below(24) as usize;
        let input: Vec<u8> = (0..n)
            .map(|_| {
                if rng.below(2) == 0 {
                    MARKERS[rng.below(MARKERS.len() as u64) as usize]
                } else {
                    rng.next() as u8
                }
            })
            .collect();
        let args: [&[u8]; 4] = [b"EVAL", script, b"0", &input];
        let (x, y) = (cmd_bin(&mut a, &args), cmd_bin(&mut b, &args));
        assert_eq!(x, y, "input {i}: {input:?}");
    }
    assert_eq!(a.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn fcall_library_uses_cmsgpack_and_struct() {
    let (t, r) = pair();
    let lib = "#!lua name=msgpacklib\n\
        redis.register_function('roundtrip', function(keys, args) \
          local p = cmsgpack.pack({job = args[1], n = tonumber(args[2])}) \
          redis.call('set', keys[1], p) \
          local u = cmsgpack.unpack(redis.call('get', keys[1])) \
          return {p, u.job, u.n, struct.pack('>I4', u.n)} end)\n\
        redis.register_function('unpack', function(keys, args) \
          return {cmsgpack.unpack(args[1])} end)";
    for port in [t.port, r.port] {
        let mut c = Conn::connect(port);
        assert_eq!(
            c.cmd(&["FUNCTION", "LOAD", lib]),
            Reply::Bulk(b"msgpacklib".to_vec())
        );
    }
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    for n in ["1", "300", "70000"] {
        let args = ["FCALL", "roundtrip", "1", "job:1", "payload", n];
        let (x, y) = (a.cmd(&args), b.cmd(&args));
        assert!(matches!(&x, Reply::Array(v) if v.len() == 4), "{x:?}");
        assert_eq!(x, y, "n = {n}");
    }
    // Decoding errors name the function's line, as in redis.
    for input in [&b"\xda\x00"[..], b"\x93\x01\xa1x\xc3", b"\xc1"] {
        let args: [&[u8]; 4] = [b"FCALL", b"unpack", b"0", input];
        let (x, y) = (cmd_bin(&mut a, &args), cmd_bin(&mut b, &args));
        assert_eq!(x, y, "input {input:?}");
    }
}

/// Strings or tables beyond what tessera returns at once (7000; redis allows up to 7999)
/// raise Lua's stack error instead of crashing the server.
#[test]
fn huge_results_raise_errors() {
    let t = Server::tessera(&[]);
    let mut a = Conn::connect(t.port);
    for s in [
        "return #{cmsgpack.unpack(string.rep('\\144', 7990))}",
        "return #{cmsgpack.unpack_limit(string.rep('\\161x', 7990), 7990)}",
        "return #{struct.unpack(string.rep('s', 7900), string.rep('\\0', 7900))}",
    ] {
        match a.cmd(&["EVAL", s, "0"]) {
            Reply::Error(e) => assert!(e.contains("stack overflow"), "{s}: {e}"),
            other => panic!("{s}: {other:?}"),
        }
    }
    assert_eq!(a.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

/// Random formats and arguments through struct.pack, then struct.unpack and struct.size of
/// the same format (numbers compared as Lua prints them), identical to redis.
#[test]
fn struct_random_matches_redis() {
    let (t, r) = pair();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let script = "local args = {} \
        for i = 2, #ARGV do args[#args + 1] = tonumber(ARGV[i]) or ARGV[i] end \
        local p = {pcall(struct.pack, ARGV[1], unpack(args))} \
        if not p[1] then return 'E:' .. tostring(p[2]) end \
        local u = {pcall(struct.unpack, ARGV[1], p[2])} \
        for i = 1, #u do u[i] = tostring(u[i]) end \
        local z = {pcall(struct.size, ARGV[1])} \
        return {p[2], u, tostring(z[1]), tostring(z[2])}";
    const OPTS: &[&str] = &[
        "<", ">", "!", "!1", "!2", "!4", "!8", " ", "b", "B", "h", "H", "l", "L", "T", "i", "I",
        "i1", "i2", "i3", "I5", "i8", "I9", "f", "d", "x", "s", "c3", "c0",
    ];
    let mut rng = Rng(0x57c7_0000_1111_2222);
    for case in 0..300 {
        let mut fmt = String::new();
        let mut args: Vec<String> = Vec::new();
        for _ in 0..rng.below(6) + 1 {
            let o = OPTS[rng.below(OPTS.len() as u64) as usize];
            fmt.push_str(o);
            match o.as_bytes()[0] {
                b's' | b'c' => args.push(["abc", "hello", "", "x y"][rng.below(4) as usize].into()),
                b'f' | b'd' => args.push(format!("{}", (rng.next() as i64 >> 30) as f64 / 7.0)),
                b'<' | b'>' | b'!' | b' ' | b'x' => {}
                _ => args.push(format!("{}", rng.next() as i64 >> rng.below(64))),
            }
        }
        let mut cmd: Vec<&str> = vec!["EVAL", script, "0", &fmt];
        cmd.extend(args.iter().map(String::as_str));
        let (x, y) = (a.cmd(&cmd), b.cmd(&cmd));
        assert_eq!(x, y, "case {case}: {cmd:?}");
    }
}
