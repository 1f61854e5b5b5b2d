//! `x-kubernetes-validations`: a small CEL interpreter for the rule shapes CRDs commonly use —
//! literals, `self`/`oldSelf`, field access, indexing, `has()`, `size()`, comparisons,
//! arithmetic, `&&`/`||`/`!`, `?:`, `in`, the `all`/`exists`/`exists_one`/`map`/`filter` macros
//! and the string functions `startsWith`/`endsWith`/`contains`/`matches`. Hand-written: the CEL
//! crates are far larger than this need. A rule this subset cannot parse or evaluate is skipped
//! (not enforced), never rejected; transition rules (using `oldSelf`) run only on updates.

use super::error::{FieldError, FieldErrorKind};
use serde_json::{json, Value};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    Float(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
}

const OPS: [&str; 24] = [
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "+", "-", "*", "/", "%", "?", ":", ".", ",",
    "(", ")", "[", "]", "{", "}",
];

fn lex(src: &str) -> Option<Vec<Tok>> {
    let b: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = vec![];
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let st = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == '.') {
                i += 1;
            }
            let s: String = b[st..i].iter().collect();
            if i < b.len() && (b[i] == 'u' || b[i] == 'U') {
                i += 1;
            }
            out.push(if s.contains('.') {
                Tok::Float(s.parse().ok()?)
            } else {
                Tok::Int(s.parse().ok()?)
            });
        } else if c == '\'' || c == '"' {
            let q = c;
            i += 1;
            let mut s = String::new();
            while i < b.len() && b[i] != q {
                if b[i] == '\\' && i + 1 < b.len() {
                    i += 1;
                    s.push(match b[i] {
                        'n' => '\n',
                        't' => '\t',
                        x => x,
                    });
                } else {
                    s.push(b[i]);
                }
                i += 1;
            }
            i += 1;
            out.push(Tok::Str(s));
        } else if c.is_alphabetic() || c == '_' {
            let st = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(b[st..i].iter().collect()));
        } else {
            let two: String = b[i..(i + 2).min(b.len())].iter().collect();
            let op = OPS
                .iter()
                .find(|o| o.len() == 2 && **o == two)
                .or_else(|| OPS.iter().find(|o| o.len() == 1 && o.starts_with(c)))?;
            i += op.len();
            out.push(Tok::Op(op));
        }
    }
    Some(out)
}

#[derive(Debug, Clone)]
enum Expr {
    Lit(Value),
    Ident(String),
    Member(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Call(Option<Box<Expr>>, String, Vec<Expr>),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
    Map(Vec<(Expr, Expr)>),
}

struct Parser {
    t: Vec<Tok>,
    i: usize,
}

impl Parser {
    fn peek_op(&self, op: &str) -> bool {
        matches!(self.t.get(self.i), Some(Tok::Op(o)) if *o == op)
    }
    fn eat(&mut self, op: &str) -> bool {
        let hit = self.peek_op(op) || matches!(self.t.get(self.i), Some(Tok::Ident(s)) if s == op);
        if hit {
            self.i += 1;
        }
        hit
    }
    fn expect(&mut self, op: &str) -> Option<()> {
        self.eat(op).then_some(())
    }
    fn expr(&mut self) -> Option<Expr> {
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            return Some(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
        }
        Some(c)
    }
    fn binary(&mut self, level: usize) -> Option<Expr> {
        const LEVELS: [&[&str]; 5] = [
            &["||"],
            &["&&"],
            &["==", "!=", "<=", ">=", "<", ">", "in"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        'outer: loop {
            for op in LEVELS[level] {
                if self.eat(op) {
                    let rhs = self.binary(level + 1)?;
                    lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
                    continue 'outer;
                }
            }
            return Some(lhs);
        }
    }
    fn unary(&mut self) -> Option<Expr> {
        if self.eat("!") {
            return Some(Expr::Unary("!", Box::new(self.unary()?)));
        }
        if self.eat("-") {
            return Some(Expr::Unary("-", Box::new(self.unary()?)));
        }
        self.postfix()
    }
    fn args(&mut self, close: &str) -> Option<Vec<Expr>> {
        let mut a = vec![];
        if self.eat(close) {
            return Some(a);
        }
        loop {
            a.push(self.expr()?);
            if self.eat(close) {
                return Some(a);
            }
            self.expect(",")?;
        }
    }
    fn postfix(&mut self) -> Option<Expr> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let Some(Tok::Ident(name)) = self.t.get(self.i).cloned() else {
                    return None;
                };
                self.i += 1;
                e = if self.eat("(") {
                    Expr::Call(Some(Box::new(e)), name, self.args(")")?)
                } else {
                    Expr::Member(Box::new(e), name)
                };
            } else if self.eat("[") {
                let idx = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(idx));
            } else {
                return Some(e);
            }
        }
    }
    fn primary(&mut self) -> Option<Expr> {
        let tok = self.t.get(self.i).cloned()?;
        self.i += 1;
        Some(match tok {
            Tok::Int(n) => Expr::Lit(json!(n)),
            Tok::Float(f) => Expr::Lit(json!(f)),
            Tok::Str(s) => Expr::Lit(Value::String(s)),
            Tok::Ident(id) => match id.as_str() {
                "true" => Expr::Lit(json!(true)),
                "false" => Expr::Lit(json!(false)),
                "null" => Expr::Lit(Value::Null),
                _ if self.eat("(") => Expr::Call(None, id, self.args(")")?),
                _ => Expr::Ident(id),
            },
            Tok::Op("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                e
            }
            Tok::Op("[") => Expr::List(self.args("]")?),
            Tok::Op("{") => {
                let mut m = vec![];
                if !self.eat("}") {
                    loop {
                        let k = self.expr()?;
                        self.expect(":")?;
                        m.push((k, self.expr()?));
                        if self.eat("}") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Expr::Map(m)
            }
            Tok::Op(_) => return None,
        })
    }
}

fn parse(src: &str) -> Option<Expr> {
    let mut p = Parser { t: lex(src)?, i: 0 };
    let e = p.expr()?;
    (p.i == p.t.len()).then_some(e)
}

type Env<'a> = HashMap<String, Value>;

fn truthy(v: &Value) -> Option<bool> {
    v.as_bool()
}

fn num_eq(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
    }
}

fn elements(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(a) => Some(a.clone()),
        Value::Object(m) => Some(m.keys().map(|k| Value::String(k.clone())).collect()),
        _ => None,
    }
}

fn eval(e: &Expr, env: &Env<'_>) -> Option<Value> {
    Some(match e {
        Expr::Lit(v) => v.clone(),
        Expr::Ident(id) => env.get(id)?.clone(),
        Expr::Member(t, f) => eval(t, env)?.get(f)?.clone(),
        Expr::Index(t, i) => {
            let t = eval(t, env)?;
            let i = eval(i, env)?;
            match (&t, &i) {
                (Value::Array(a), _) => a.get(usize::try_from(i.as_i64()?).ok()?)?.clone(),
                (Value::Object(m), Value::String(k)) => m.get(k)?.clone(),
                _ => return None,
            }
        }
        Expr::List(items) => {
            Value::Array(items.iter().map(|x| eval(x, env)).collect::<Option<_>>()?)
        }
        Expr::Map(kv) => {
            let mut m = serde_json::Map::new();
            for (k, v) in kv {
                m.insert(eval(k, env)?.as_str()?.to_string(), eval(v, env)?);
            }
            Value::Object(m)
        }
        Expr::Cond(c, a, b) => {
            if truthy(&eval(c, env)?)? {
                eval(a, env)?
            } else {
                eval(b, env)?
            }
        }
        Expr::Unary("!", x) => json!(!truthy(&eval(x, env)?)?),
        Expr::Unary(_, x) => {
            let v = eval(x, env)?;
            v.as_i64()
                .map(|n| json!(-n))
                .or_else(|| v.as_f64().map(|f| json!(-f)))?
        }
        Expr::Binary("&&", a, b) => {
            // CEL's && and || are commutative over errors; short-circuit covers the common case.
            let l = eval(a, env).and_then(|v| truthy(&v));
            if l == Some(false) {
                return Some(json!(false));
            }
            let r = truthy(&eval(b, env)?)?;
            json!(l? && r)
        }
        Expr::Binary("||", a, b) => {
            let l = eval(a, env).and_then(|v| truthy(&v));
            if l == Some(true) {
                return Some(json!(true));
            }
            let r = truthy(&eval(b, env)?)?;
            json!(l? || r)
        }
        Expr::Binary(op, a, b) => binary(op, eval(a, env)?, eval(b, env)?)?,
        Expr::Call(None, f, args) if f == "has" => {
            let [Expr::Member(t, field)] = args.as_slice() else {
                return None;
            };
            json!(eval(t, env)?.as_object()?.contains_key(field))
        }
        Expr::Call(Some(t), m, args)
            if matches!(
                m.as_str(),
                "all" | "exists" | "exists_one" | "map" | "filter"
            ) =>
        {
            let [Expr::Ident(var), body] = args.as_slice() else {
                return None;
            };
            let items = elements(&eval(t, env)?)?;
            let mut env2 = env.clone();
            let mut results = vec![];
            for it in &items {
                env2.insert(var.clone(), it.clone());
                results.push((it.clone(), eval(body, &env2)?));
            }
            let bools = || {
                results
                    .iter()
                    .map(|(_, r)| truthy(r))
                    .collect::<Option<Vec<bool>>>()
            };
            match m.as_str() {
                "all" => json!(bools()?.iter().all(|b| *b)),
                "exists" => json!(bools()?.iter().any(|b| *b)),
                "exists_one" => json!(bools()?.iter().filter(|b| **b).count() == 1),
                "map" => Value::Array(results.into_iter().map(|(_, r)| r).collect()),
                _ => {
                    let keep = bools()?;
                    Value::Array(
                        results
                            .into_iter()
                            .zip(keep)
                            .filter(|(_, k)| *k)
                            .map(|((i, _), _)| i)
                            .collect(),
                    )
                }
            }
        }
        Expr::Call(target, f, args) => {
            let mut vals = vec![];
            if let Some(t) = target {
                vals.push(eval(t, env)?);
            }
            for a in args {
                vals.push(eval(a, env)?);
            }
            call(f, &vals)?
        }
    })
}

fn binary(op: &str, a: Value, b: Value) -> Option<Value> {
    Some(match op {
        "==" => json!(num_eq(&a, &b)),
        "!=" => json!(!num_eq(&a, &b)),
        "in" => match &b {
            Value::Array(l) => json!(l.iter().any(|x| num_eq(x, &a))),
            Value::Object(m) => json!(m.contains_key(a.as_str()?)),
            _ => return None,
        },
        "<" | "<=" | ">" | ">=" => {
            let ord = match (&a, &b) {
                (Value::String(x), Value::String(y)) => x.cmp(y),
                _ => a.as_f64()?.partial_cmp(&b.as_f64()?)?,
            };
            json!(match op {
                "<" => ord.is_lt(),
                "<=" => ord.is_le(),
                ">" => ord.is_gt(),
                _ => ord.is_ge(),
            })
        }
        "+" => match (&a, &b) {
            (Value::String(x), Value::String(y)) => json!(format!("{x}{y}")),
            (Value::Array(x), Value::Array(y)) => {
                Value::Array(x.iter().chain(y).cloned().collect())
            }
            _ => arith(op, &a, &b)?,
        },
        _ => arith(op, &a, &b)?,
    })
}

fn arith(op: &str, a: &Value, b: &Value) -> Option<Value> {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return Some(json!(match op {
            "+" => x.checked_add(y)?,
            "-" => x.checked_sub(y)?,
            "*" => x.checked_mul(y)?,
            "/" => x.checked_div(y)?,
            "%" => x.checked_rem(y)?,
            _ => return None,
        }));
    }
    let (x, y) = (a.as_f64()?, b.as_f64()?);
    Some(json!(match op {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        "/" => x / y,
        _ => return None,
    }))
}

fn call(f: &str, v: &[Value]) -> Option<Value> {
    let s = |i: usize| v.get(i).and_then(Value::as_str);
    Some(match (f, v.len()) {
        ("size", 1) => json!(match &v[0] {
            Value::String(x) => x.chars().count(),
            Value::Array(a) => a.len(),
            Value::Object(m) => m.len(),
            _ => return None,
        }),
        ("startsWith", 2) => json!(s(0)?.starts_with(s(1)?)),
        ("endsWith", 2) => json!(s(0)?.ends_with(s(1)?)),
        ("contains", 2) => json!(s(0)?.contains(s(1)?)),
        ("matches", 2) => json!(regex::Regex::new(s(1)?).ok()?.is_match(s(0)?)),
        ("lowerAscii", 1) => json!(s(0)?.to_ascii_lowercase()),
        ("upperAscii", 1) => json!(s(0)?.to_ascii_uppercase()),
        ("int", 1) => json!(v[0].as_i64().or_else(|| s(0)?.parse().ok())?),
        ("string", 1) => json!(match &v[0] {
            Value::String(x) => x.clone(),
            other => other.to_string(),
        }),
        // The quantity library (Kubernetes 1.29+): a quantity is its value as a number here.
        ("isQuantity", 1) => json!(quantity(s(0)?).is_some()),
        ("quantity", 1) => json!(quantity(s(0)?)?),
        ("isLessThan", 2) => json!(v[0].as_f64()? < v[1].as_f64()?),
        ("isGreaterThan", 2) => json!(v[0].as_f64()? > v[1].as_f64()?),
        ("compareTo", 2) => json!(match v[0].as_f64()?.partial_cmp(&v[1].as_f64()?)? {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        }),
        _ => return None,
    })
}

/// A Kubernetes quantity's value (`1Gi`, `500M`, `1.5`, `2e3`, `100m`); None if malformed.
pub(crate) fn quantity(q: &str) -> Option<f64> {
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    if num.is_empty() || num.matches('.').count() > 1 {
        return None;
    }
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        e => 10f64.powi(e.strip_prefix(['e', 'E'])?.parse().ok()?),
    };
    Some(n * mult)
}

/// Evaluates a rule; None when it cannot be parsed or evaluated by this subset.
fn rule_holds(rule: &str, selfv: &Value, old: Option<&Value>) -> Option<bool> {
    let e = parse(rule)?;
    let mut env = HashMap::new();
    env.insert("self".to_string(), selfv.clone());
    if rule.contains("oldSelf") {
        env.insert("oldSelf".to_string(), old?.clone());
    }
    truthy(&eval(&e, &env)?)
}

/// Checks the `x-kubernetes-validations` of `schema` against `v` (and the old value on updates).
pub fn check(
    schema: &Value,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    else {
        return;
    };
    for r in rules {
        let Some(rule) = r.get("rule").and_then(Value::as_str) else {
            continue;
        };
        if rule_holds(rule, v, old) != Some(false) {
            continue;
        }
        let msg = r
            .get("message")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| format!("failed rule: {rule}"));
        let field = match r.get("fieldPath").and_then(Value::as_str) {
            Some(fp) if path.is_empty() => fp.trim_start_matches('.').to_string(),
            Some(fp) => format!("{path}{fp}"),
            None => path.to_string(),
        };
        let kind = match r.get("reason").and_then(Value::as_str) {
            Some("FieldValueForbidden") => FieldErrorKind::Forbidden,
            Some("FieldValueRequired") => FieldErrorKind::Required,
            _ => FieldErrorKind::Invalid,
        };
        errs.push(FieldError {
            field,
            kind,
            value: Some(v.clone()),
            detail: msg,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(rule: &str, s: Value, old: Option<Value>) -> Option<bool> {
        rule_holds(rule, &s, old.as_ref())
    }

    #[test]
    fn quantities_compare_by_value() {
        let grow = "!quantity(self.size).isLessThan(quantity(oldSelf.size))";
        let q = |new: &str, old: &str| {
            holds(grow, json!({ "size": new }), Some(json!({ "size": old })))
        };
        assert_eq!(q("2Gi", "1Gi"), Some(true));
        assert_eq!(q("1024Mi", "1Gi"), Some(true));
        assert_eq!(q("1G", "1Gi"), Some(false));
        assert_eq!(q("512Mi", "1Gi"), Some(false));
        assert_eq!(q("1.5Gi", "1Gi"), Some(true));
        assert_eq!(holds("isQuantity(self)", json!("10Gi"), None), Some(true));
        assert_eq!(holds("isQuantity(self)", json!("10GB"), None), Some(false));
        assert_eq!(holds("isQuantity(self)", json!("Gi"), None), Some(false));
        assert_eq!(
            holds(
                "quantity(self).compareTo(quantity('1k')) == 0",
                json!("1000"),
                None
            ),
            Some(true)
        );
    }

    #[test]
    fn rule_shapes_used_by_crds() {
        let owned = "self.all(k, !(k in ['port','bind','cluster-enabled']))";
        assert_eq!(holds(owned, json!({"maxmemory": "1gb"}), None), Some(true));
        assert_eq!(holds(owned, json!({"port": "1"}), None), Some(false));
        let immut = "has(self.storage) == has(oldSelf.storage) && (!has(self.storage) || self.storage == oldSelf.storage)";
        assert_eq!(
            holds(immut, json!({"storage": {"size": "1Gi"}}), None),
            None,
            "transition rule skipped on create"
        );
        assert_eq!(
            holds(
                immut,
                json!({"storage": {"size": "1Gi"}}),
                Some(json!({"storage": {"size": "1Gi"}}))
            ),
            Some(true)
        );
        assert_eq!(
            holds(
                immut,
                json!({"storage": {"size": "2Gi"}}),
                Some(json!({"storage": {"size": "1Gi"}}))
            ),
            Some(false)
        );
        assert_eq!(
            holds(immut, json!({}), Some(json!({"storage": {}}))),
            Some(false)
        );
        assert_eq!(
            holds(
                "self.minReplicas <= self.replicas",
                json!({"minReplicas": 1, "replicas": 3}),
                None
            ),
            Some(true)
        );
        assert_eq!(
            holds(
                "size(self.name) < 5 && self.name.startsWith('ab')",
                json!({"name": "abc"}),
                None
            ),
            Some(true)
        );
        assert_eq!(
            holds(
                "self.x > 0 ? self.y == 'a' : true",
                json!({"x": 1, "y": "b"}),
                None
            ),
            Some(false)
        );
        assert_eq!(
            holds(
                "self.items.exists(i, i.n == 2)",
                json!({"items": [{"n": 1}, {"n": 2}]}),
                None
            ),
            Some(true)
        );
        assert_eq!(holds("self.unsupported.foo(", json!({}), None), None);
    }
}
