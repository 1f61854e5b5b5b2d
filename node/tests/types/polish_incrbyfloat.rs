//! INCRBYFLOAT computes in 80-bit long double like Redis 7.0 (`types::ldouble::LDouble`):
//! differential test against the real redis-server, replies compared byte for byte.

use tessera_testkit::diff::*;

#[test]
fn incrbyfloat_matches_redis() {
    diff_script(
        "incrbyfloat",
        r#"
        set k 0.3
        incrbyfloat k 1e3
        get k
        incrbyfloat k 0.1
        incrbyfloat k 0.1
        incrbyfloat k -1000.5
        incrbyfloat fresh 10.5
        incrbyfloat fresh2 -0
        get fresh2
        incrbyfloat e 5.0e3
        incrbyfloat e 1E-3
        incrbyfloat e 0x10
        incrbyfloat e +3
        incrbyfloat e 1e
        incrbyfloat e " 1"
        incrbyfloat e "1 "
        incrbyfloat e ""
        incrbyfloat e abc
        incrbyfloat e nan
        incrbyfloat e inf
        incrbyfloat e -infinity
        incrbyfloat e 1e5000
        incrbyfloat e 1e-5000
        get e
        set i 17
        incrbyfloat i 0.1
        set s abc
        incrbyfloat s 1
        set inf inf
        incrbyfloat inf 1
        lpush l a
        incrbyfloat l 1
        incrbyfloat l abc
        set big 1e308
        incrbyfloat big 1e308
        incrbyfloat huge 1e4000
        strlen huge
        incrbyfloat huge -1e4000
        incrbyfloat small 1.5e-10
        incrbyfloat neg -3.25
        incrbyfloat neg 3.25
        get neg
        set t 1 ex 100
        incrbyfloat t 1.5
        ttl t
        incrbyfloat x 9007199254740993
        incrbyfloat x 0.5
        incrbyfloat y 3.0000000000000000001
        incrbyfloat z 1.23456789012345678901234567890
        incrbyfloat d 0x1p-16446
        incrbyfloat d 1e-4940
        incrbyfloat d 0x1p20000
        hincrbyfloat h f 1e5000
        hincrbyfloat h f 1e-5000
        hincrbyfloat h f 0.3
        hincrbyfloat h f 1e3
        "#,
    );
}
