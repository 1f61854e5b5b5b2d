//! Redis's glob patterns (stringmatchlen): KEYS, SCAN MATCH, PSUBSCRIBE, ACL key and channel
//! patterns, CONFIG GET. A utility below every layer that matches patterns.

/// Redis glob matching (`*`, `?`, `[a-z]`, `[^x]`, `\` escapes), optionally case-insensitive.
pub fn glob_match(pat: &[u8], s: &[u8], nocase: bool) -> bool {
    fn eq(a: u8, b: u8, nocase: bool) -> bool {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    }
    let (mut p, mut i) = (0usize, 0usize);
    let (mut star_p, mut star_i) = (usize::MAX, 0usize);
    while i < s.len() {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    while p < pat.len() && pat[p] == b'*' {
                        p += 1;
                    }
                    if p == pat.len() {
                        return true;
                    }
                    star_p = p;
                    star_i = i;
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    let mut q = p + 1;
                    let not = q < pat.len() && pat[q] == b'^';
                    if not {
                        q += 1;
                    }
                    let mut matched = false;
                    while q < pat.len() && pat[q] != b']' {
                        if pat[q] == b'\\' && q + 1 < pat.len() {
                            q += 1;
                            if eq(pat[q], s[i], nocase) {
                                matched = true;
                            }
                        } else if q + 2 < pat.len() && pat[q + 1] == b'-' && pat[q + 2] != b']' {
                            let (mut lo, mut hi) = (pat[q], pat[q + 2]);
                            if lo > hi {
                                std::mem::swap(&mut lo, &mut hi);
                            }
                            let c = if nocase {
                                s[i].to_ascii_lowercase()
                            } else {
                                s[i]
                            };
                            let (lo2, hi2) = if nocase {
                                (lo.to_ascii_lowercase(), hi.to_ascii_lowercase())
                            } else {
                                (lo, hi)
                            };
                            if c >= lo2 && c <= hi2 {
                                matched = true;
                            }
                            q += 2;
                        } else if eq(pat[q], s[i], nocase) {
                            matched = true;
                        }
                        q += 1;
                    }
                    if matched != not {
                        p = if q < pat.len() { q + 1 } else { q };
                        i += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pat.len() => {
                    if eq(pat[p + 1], s[i], nocase) {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, s[i], nocase) {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        if star_p != usize::MAX {
            star_i += 1;
            i = star_i;
            p = star_p;
            continue;
        }
        return false;
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}
