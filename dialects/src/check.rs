//! CHECK expressions between dialects: the source's text -> neutral [`Expr`] (through
//! sqlparser's expression parser), and neutral -> each target's spelling.
//!
//! Only the common subset becomes neutral; anything else (subqueries, regular
//! expressions, dialect functions) returns `None` and stays dialect-tagged text, which
//! the emitter reports where the target cannot take it. Casts that only restate a
//! literal's or a text column's type (pg_dump writes `(0)::numeric`, `'f'::bpchar`,
//! `(email)::text`) are dropped; `x = ANY (ARRAY[...])` is read as `x IN (...)`.

use crate::lower::stored_name;
use crate::Dialect;
use ddl_core::expr::{BinaryOp, Expr, Func, TypedKind};
use ddl_core::Literal;
use sqlparser::ast::{self as sq, BinaryOperator as B};
use sqlparser::parser::Parser;

/// Deeper expressions than this stay text (sqlparser's own recursion limit is 50).
const MAX_DEPTH: usize = 40;

/// The neutral form of a CHECK expression written in `dialect`, if it has one.
pub fn parse(dialect: Dialect, text: &str) -> Option<Expr> {
    // Wrapping parentheses are dropped first: they mean nothing, however many.
    let text = crate::lower::strip_parens(text);
    // Dumps repeat expressions (the same CHECK in every tenant's schema, the same
    // default on many columns): each is read once, remembered by its text.
    type Seen = std::collections::HashMap<String, Option<Expr>>;
    thread_local! {
        static SEEN: std::cell::RefCell<[Seen; 3]> = Default::default();
    }
    let i = match dialect {
        Dialect::MySql => 0,
        Dialect::Postgres => 1,
        Dialect::Oracle => 2,
    };
    if let Some(e) = SEEN.with(|m| m.borrow()[i].get(text).cloned()) {
        return e;
    }
    let e = read(dialect, text);
    SEEN.with(|m| {
        let m = &mut m.borrow_mut()[i];
        if m.len() >= SEEN_MAX {
            m.clear();
        }
        m.insert(text.to_owned(), e.clone());
    });
    e
}

/// How many expressions [`parse`] remembers (then it starts again).
const SEEN_MAX: usize = 4096;

fn read(dialect: Dialect, text: &str) -> Option<Expr> {
    let d = crate::parse::sq_dialect(dialect);
    let e = Parser::new(d).try_with_sql(text).ok()?.parse_expr().ok()?;
    Reader { dialect, depth: 0 }.expr(&e)
}

/// The neutral form of an expression sqlparser already read.
pub fn from_sq(dialect: Dialect, e: &sq::Expr) -> Option<Expr> {
    Reader { dialect, depth: 0 }.expr(e)
}

struct Reader {
    dialect: Dialect,
    depth: usize,
}

impl Reader {
    fn expr(&mut self, e: &sq::Expr) -> Option<Expr> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let r = self.expr_inner(e);
        self.depth -= 1;
        r
    }

    fn boxed(&mut self, e: &sq::Expr) -> Option<Box<Expr>> {
        self.expr(e).map(Box::new)
    }

    fn expr_inner(&mut self, e: &sq::Expr) -> Option<Expr> {
        use sq::Expr as S;
        Some(match e {
            S::Identifier(i) => self.column(i)?,
            S::CompoundIdentifier(parts) => self.column(parts.last()?)?,
            S::Value(v) => Expr::Literal {
                value: literal(&v.value)?,
            },
            S::Nested(inner) => return self.expr(inner),
            S::UnaryOp { op, expr } => match op {
                sq::UnaryOperator::Not => Expr::Not {
                    expr: self.boxed(expr)?,
                },
                sq::UnaryOperator::Minus => match self.expr(expr)? {
                    Expr::Literal {
                        value: Literal::Number(n),
                    } => Expr::Literal {
                        value: Literal::Number(format!("-{n}")),
                    },
                    other => Expr::Neg {
                        expr: Box::new(other),
                    },
                },
                sq::UnaryOperator::Plus => return self.expr(expr),
                _ => return None,
            },
            S::BinaryOp { left, op, right } => {
                let (l, r) = (self.boxed(left)?, self.boxed(right)?);
                let like = |negated| Expr::Like {
                    expr: l.clone(),
                    pattern: r.clone(),
                    escape: None,
                    negated,
                };
                let op = match op {
                    B::And => BinaryOp::And,
                    B::Or => BinaryOp::Or,
                    B::Eq => BinaryOp::Eq,
                    B::NotEq => BinaryOp::NotEq,
                    B::Lt => BinaryOp::Lt,
                    B::LtEq => BinaryOp::LtEq,
                    B::Gt => BinaryOp::Gt,
                    B::GtEq => BinaryOp::GtEq,
                    B::Plus => BinaryOp::Add,
                    B::Minus => BinaryOp::Sub,
                    B::Multiply => BinaryOp::Mul,
                    B::Divide => BinaryOp::Div,
                    B::Modulo => BinaryOp::Mod,
                    // MySQL's `||` is OR unless PIPES_AS_CONCAT; sqlparser reads it
                    // as concatenation in every dialect.
                    B::StringConcat if self.dialect != Dialect::MySql => BinaryOp::Concat,
                    B::PGLikeMatch => return Some(like(false)),
                    B::PGNotLikeMatch => return Some(like(true)),
                    B::PGRegexMatch | B::PGRegexNotMatch => {
                        let m = Expr::Function {
                            func: Func::RegexpMatch,
                            args: vec![*l, *r],
                        };
                        return Some(match op {
                            B::PGRegexNotMatch => Expr::Not { expr: Box::new(m) },
                            _ => m,
                        });
                    }
                    _ => return None,
                };
                Expr::Binary {
                    op,
                    left: l,
                    right: r,
                }
            }
            S::IsNull(x) => Expr::IsNull {
                expr: self.boxed(x)?,
                negated: false,
            },
            // `x IS [NOT] TRUE|FALSE` never yields NULL: `x IS NOT NULL AND x = v`
            // (or its negation, `x IS NULL OR x <> v`).
            S::IsTrue(x) | S::IsFalse(x) | S::IsNotTrue(x) | S::IsNotFalse(x) => {
                let v = matches!(e, S::IsTrue(_) | S::IsNotTrue(_));
                let negated = matches!(e, S::IsNotTrue(_) | S::IsNotFalse(_));
                let x = self.boxed(x)?;
                let lit = Box::new(Expr::Literal {
                    value: Literal::Boolean(if negated { !v } else { v }),
                });
                let (null_test, join) = match negated {
                    false => (true, BinaryOp::And),
                    true => (false, BinaryOp::Or),
                };
                Expr::Binary {
                    op: join,
                    left: Box::new(Expr::IsNull {
                        expr: x.clone(),
                        negated: null_test,
                    }),
                    right: Box::new(Expr::Binary {
                        op: BinaryOp::Eq,
                        left: x,
                        right: lit,
                    }),
                }
            }
            S::IsNotNull(x) => Expr::IsNull {
                expr: self.boxed(x)?,
                negated: true,
            },
            S::In {
                expr,
                target: sq::InTarget::List(list),
                negated,
                ..
            } => Expr::InList {
                expr: self.boxed(expr)?,
                list: list.iter().map(|x| self.expr(x)).collect::<Option<_>>()?,
                negated: *negated,
            },
            S::Between {
                expr,
                negated,
                low,
                high,
            } => Expr::Between {
                expr: self.boxed(expr)?,
                low: self.boxed(low)?,
                high: self.boxed(high)?,
                negated: *negated,
            },
            S::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char,
            } => Expr::Like {
                expr: self.boxed(expr)?,
                pattern: self.boxed(pattern)?,
                escape: match escape_char.as_deref() {
                    None => None,
                    Some(S::Value(v)) => match &v.value {
                        sq::Value::SingleQuotedString(s) => Some(s.clone()),
                        _ => return None,
                    },
                    Some(_) => return None,
                },
                negated: *negated,
            },
            // pg_dump: `x = ANY (ARRAY['a'::text, 'b'::text])`.
            S::AnyOp {
                left,
                compare_op: B::Eq,
                right,
                ..
            } => {
                // (`(ARRAY[...])::text[]` for a varchar column: parentheses and
                // casts around the array, in any order.)
                let mut inner = right.as_ref();
                while let S::Nested(x) | S::Cast { expr: x, .. } = inner {
                    inner = x;
                }
                let S::Array(a) = inner else { return None };
                Expr::InList {
                    expr: self.boxed(left)?,
                    list: a.elem.iter().map(|x| self.expr(x)).collect::<Option<_>>()?,
                    negated: false,
                }
            }
            S::Cast {
                expr, data_type, ..
            } => return self.cast(expr, data_type),
            S::TypedString(t) => {
                let kind = typed_kind(&t.data_type)?;
                let sq::Value::SingleQuotedString(s) = &t.value.value else {
                    return None;
                };
                Expr::Typed {
                    kind,
                    value: s.clone(),
                }
            }
            S::Function(f) => self.function(f)?,
            _ => return None,
        })
    }

    fn column(&self, i: &sq::Ident) -> Option<Expr> {
        // A double-quoted "word" is a string in MySQL without ANSI_QUOTES.
        if self.dialect == Dialect::MySql && i.quote_style == Some('"') {
            return Some(Expr::Literal {
                value: Literal::String(i.value.clone()),
            });
        }
        Some(Expr::column(&stored_name(
            self.dialect,
            &i.value,
            i.quote_style.is_some(),
        )))
    }

    /// A cast that only restates a type the comparison implies is dropped; a string
    /// cast to a date or time becomes a typed literal; any other cast stays text.
    fn cast(&mut self, expr: &sq::Expr, ty: &sq::DataType) -> Option<Expr> {
        let inner = self.expr(expr)?;
        if let Some(kind) = typed_kind(ty) {
            if let Expr::Literal {
                value: Literal::String(s),
            } = &inner
            {
                return Some(Expr::Typed {
                    kind,
                    value: s.clone(),
                });
            }
            return None;
        }
        // (`::"text"`: pg_dump --quote-all-identifiers quotes type names.)
        let t = ty.to_string().to_ascii_lowercase().replace('"', "");
        let textual = [
            "text",
            "bpchar",
            "character varying",
            "varchar",
            "char",
            "character",
        ]
        .iter()
        .any(|k| t == *k || t.starts_with(&format!("{k}(")));
        let numeric = [
            "numeric",
            "integer",
            "bigint",
            "smallint",
            "int",
            "decimal",
            "double precision",
            "real",
            "float",
            "float4",
            "float8",
        ]
        .iter()
        .any(|k| t == *k || t.starts_with(&format!("{k}(")));
        // PostgreSQL writes a negative constant as a string cast to its type
        // (`'-1000'::integer`): the number.
        if let (
            Expr::Literal {
                value: Literal::String(s),
            },
            true,
        ) = (&inner, numeric)
        {
            let n = s.trim();
            if n.parse::<f64>().is_ok_and(f64::is_finite)
                && n.chars().all(|c| c.is_ascii_digit() || ".-+eE".contains(c))
            {
                return Some(Expr::Literal {
                    value: Literal::Number(n.to_owned()),
                });
            }
        }
        match (&inner, textual, numeric) {
            (
                Expr::Literal {
                    value: Literal::String(_),
                },
                true,
                _,
            ) => Some(inner),
            (
                Expr::Literal {
                    value: Literal::Number(_),
                },
                _,
                true,
            ) => Some(inner),
            (Expr::Column { .. }, true, _) => Some(inner),
            _ => None,
        }
    }

    fn function(&mut self, f: &sq::Function) -> Option<Expr> {
        let name = f.name.0.last()?.as_ident()?.value.to_ascii_lowercase();
        let sq::FunctionArguments::List(l) = &f.args else {
            return None;
        };
        if l.duplicate_treatment.is_some() || !l.clauses.is_empty() {
            return None;
        }
        let args = l
            .args
            .iter()
            .map(|a| match a {
                sq::FunctionArg::Unnamed(sq::FunctionArgExpr::Expr(e)) => self.expr(e),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        let func = match (name.as_str(), self.dialect) {
            ("char_length" | "character_length", _) => Func::CharLength,
            // MySQL's LENGTH counts bytes; PostgreSQL's and Oracle's characters.
            ("length", Dialect::MySql) | ("octet_length", _) | ("lengthb", Dialect::Oracle) => {
                Func::OctetLength
            }
            ("length", _) => Func::CharLength,
            ("lower" | "lcase", _) => Func::Lower,
            ("upper" | "ucase", _) => Func::Upper,
            ("trim", _) => Func::Trim,
            ("abs", _) => Func::Abs,
            ("coalesce" | "ifnull" | "nvl", _) => Func::Coalesce,
            ("mod", _) if args.len() == 2 => {
                let mut it = args.into_iter();
                return Some(Expr::Binary {
                    op: BinaryOp::Mod,
                    left: Box::new(it.next()?),
                    right: Box::new(it.next()?),
                });
            }
            ("concat", Dialect::MySql) if args.len() >= 2 => {
                let mut it = args.into_iter();
                let first = it.next()?;
                return Some(it.fold(first, |acc, x| Expr::Binary {
                    op: BinaryOp::Concat,
                    left: Box::new(acc),
                    right: Box::new(x),
                }));
            }
            _ => return None,
        };
        let arity_ok = match func {
            Func::Coalesce => !args.is_empty(),
            Func::RegexpMatch => args.len() == 2,
            _ => args.len() == 1,
        };
        arity_ok.then_some(Expr::Function { func, args })
    }
}

fn typed_kind(t: &sq::DataType) -> Option<TypedKind> {
    match t {
        sq::DataType::Date => Some(TypedKind::Date),
        sq::DataType::Time(..) => Some(TypedKind::Time),
        sq::DataType::Timestamp(_, sq::TimezoneInfo::None | sq::TimezoneInfo::WithoutTimeZone) => {
            Some(TypedKind::Timestamp)
        }
        sq::DataType::Datetime(_) => Some(TypedKind::Timestamp),
        _ => None,
    }
}

fn literal(v: &sq::Value) -> Option<Literal> {
    Some(match v {
        sq::Value::Number(n, _) => Literal::Number(n.clone()),
        sq::Value::SingleQuotedString(s) => Literal::String(s.clone()),
        sq::Value::Boolean(b) => Literal::Boolean(*b),
        sq::Value::Null => Literal::Null,
        _ => return None,
    })
}

/// Prints a neutral expression in a target dialect.
pub struct Printer<'a> {
    pub target: Dialect,
    /// How a column name is written (case mapping and quoting are the emitter's).
    pub column: &'a mut dyn FnMut(&str) -> String,
}

impl Printer<'_> {
    pub fn print(&mut self, e: &Expr) -> String {
        self.expr(e, 0)
    }

    /// `e` in a context binding at `outer`: parenthesised when it binds looser.
    fn expr(&mut self, e: &Expr, outer: u8) -> String {
        let (s, own) = self.bare(e);
        if own < outer {
            format!("({s})")
        } else {
            s
        }
    }

    /// The text and its binding strength (comparison-like forms bind as 4, NOT as 3).
    fn bare(&mut self, e: &Expr) -> (String, u8) {
        let t = self.target;
        match e {
            Expr::Column { name } => ((self.column)(name), 10),
            Expr::Literal { value } => (literal_sql(t, value), 10),
            Expr::Typed { kind, value } => {
                let k = match kind {
                    TypedKind::Date => "DATE",
                    TypedKind::Time => "TIME",
                    TypedKind::Timestamp => "TIMESTAMP",
                };
                (format!("{k} {}", crate::emit::string_literal(t, value)), 10)
            }
            Expr::Not { expr } => (format!("NOT {}", self.expr(expr, 4)), 3),
            Expr::Neg { expr } => (format!("-{}", self.expr(expr, 9)), 9),
            Expr::Binary { op, left, right } => {
                let p = op.precedence();
                // Comparisons do not chain (PostgreSQL refuses `a = b = c`): a
                // comparison inside one keeps its parentheses on either side.
                let lp = if p == 4 { p + 1 } else { p };
                let (l, r) = (self.expr(left, lp), self.expr(right, p + 1));
                let s = match (op, t) {
                    (BinaryOp::Concat, Dialect::MySql) => return (format!("CONCAT({l}, {r})"), 10),
                    (BinaryOp::Mod, Dialect::Oracle) => {
                        let (l, r) = (self.expr(left, 0), self.expr(right, 0));
                        return (format!("MOD({l}, {r})"), 10);
                    }
                    _ => format!("{l} {} {r}", op_sql(*op)),
                };
                (s, p)
            }
            Expr::IsNull { expr, negated } => (
                format!(
                    "{} IS {}NULL",
                    self.expr(expr, 5),
                    if *negated { "NOT " } else { "" }
                ),
                4,
            ),
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let items: Vec<String> = list.iter().map(|x| self.expr(x, 0)).collect();
                (
                    format!(
                        "{} {}IN ({})",
                        self.expr(expr, 5),
                        if *negated { "NOT " } else { "" },
                        items.join(", ")
                    ),
                    4,
                )
            }
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => (
                format!(
                    "{} {}BETWEEN {} AND {}",
                    self.expr(expr, 5),
                    if *negated { "NOT " } else { "" },
                    self.expr(low, 5),
                    self.expr(high, 5)
                ),
                4,
            ),
            Expr::Like {
                expr,
                pattern,
                escape,
                negated,
            } => {
                let mut s = format!(
                    "{} {}LIKE {}",
                    self.expr(expr, 5),
                    if *negated { "NOT " } else { "" },
                    self.expr(pattern, 5)
                );
                if let Some(x) = escape {
                    s.push_str(&format!(" ESCAPE {}", crate::emit::string_literal(t, x)));
                }
                (s, 4)
            }
            Expr::Function { func, args } => {
                let name = match (func, t) {
                    (Func::CharLength, Dialect::MySql) => "CHAR_LENGTH",
                    (Func::CharLength, Dialect::Postgres) => "char_length",
                    (Func::CharLength, Dialect::Oracle) => "LENGTH",
                    (Func::OctetLength, Dialect::MySql) => "LENGTH",
                    (Func::OctetLength, Dialect::Postgres) => "octet_length",
                    (Func::OctetLength, Dialect::Oracle) => "LENGTHB",
                    (Func::Lower, _) => "LOWER",
                    (Func::Upper, _) => "UPPER",
                    (Func::Trim, _) => "TRIM",
                    (Func::Abs, _) => "ABS",
                    (Func::Coalesce, _) => "COALESCE",
                    (Func::RegexpMatch, Dialect::Oracle) => "REGEXP_LIKE",
                    (Func::RegexpMatch, _) => {
                        let (x, p) = (self.expr(&args[0], 5), self.expr(&args[1], 5));
                        let op = if t == Dialect::MySql { "REGEXP" } else { "~" };
                        return (format!("{x} {op} {p}"), 4);
                    }
                };
                let args: Vec<String> = args.iter().map(|x| self.expr(x, 0)).collect();
                (format!("{name}({})", args.join(", ")), 10)
            }
        }
    }
}

fn op_sql(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::And => "AND",
        BinaryOp::Or => "OR",
        BinaryOp::Eq => "=",
        BinaryOp::NotEq => "<>",
        BinaryOp::Lt => "<",
        BinaryOp::LtEq => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::GtEq => ">=",
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Mod => "%",
        BinaryOp::Concat => "||",
    }
}

fn literal_sql(t: Dialect, l: &Literal) -> String {
    match l {
        Literal::Null => "NULL".into(),
        Literal::Boolean(b) => match t {
            Dialect::Postgres => b.to_string(),
            _ => if *b { "1" } else { "0" }.into(),
        },
        Literal::Number(n) => n.clone(),
        Literal::String(s) => crate::emit::string_literal(t, s),
        Literal::Bytes(h) => crate::emit::bytes_literal(t, h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn via(source: Dialect, target: Dialect, text: &str) -> String {
        let e = parse(source, text).unwrap_or_else(|| panic!("not neutral: {text}"));
        let mut col = |c: &str| c.to_owned();
        Printer {
            target,
            column: &mut col,
        }
        .print(&e)
    }

    #[test]
    fn pg_dump_spellings_read_as_the_source_meant() {
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::MySql,
                "((sex = ANY (ARRAY['f'::bpchar, 'm'::bpchar, 'x'::bpchar])))"
            ),
            "sex IN ('f', 'm', 'x')"
        );
        // regression: a varchar column's IN list, as pg_dump writes it (the array
        // cast to text[] around parentheses), stayed text and was not created.
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::MySql,
                "(((kind)::text = ANY ((ARRAY['in'::character varying, 'out'::character varying])::text[])))"
            ),
            "kind IN ('in', 'out')"
        );
        // regression (a Django dump): a float column's literal cast stayed text.
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::MySql,
                "(((amount IS NULL) OR (amount <> (0)::double precision)))"
            ),
            "amount IS NULL OR amount <> 0"
        );
        // regression: `(s = 2) = (c IS NOT NULL)` lost its parentheses.
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::MySql,
                "((s = 2) = (c IS NOT NULL))"
            ),
            "(s = 2) = (c IS NOT NULL)"
        );
        // pg_dump --quote-all-identifiers: function and type names quoted.
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::MySql,
                "(\"upper\"((\"code\")::\"text\") = (\"code\")::\"text\")"
            ),
            "UPPER(code) = code"
        );
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::Oracle,
                "(((amount > (0)::numeric) AND (amount <= (100000)::numeric)))"
            ),
            "amount > 0 AND amount <= 100000"
        );
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::MySql,
                "((VALUE)::text ~~ '%@%'::text)"
            ),
            "value LIKE '%@%'"
        );
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::MySql,
                "((born > '1900-01-01'::date))"
            ),
            "born > DATE '1900-01-01'"
        );
        // regression (a hostile tester's `balance >= -1000`): a negative constant,
        // as pg_get_constraintdef and pg_dump write it, stayed text and the CHECK
        // was not created on MySQL.
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::MySql,
                "((balance >= ('-1000'::integer)::numeric) AND (r > '-0.5'::numeric))"
            ),
            "balance >= -1000 AND r > -0.5"
        );
    }

    #[test]
    fn functions_and_precedence_per_dialect() {
        assert_eq!(
            via(
                Dialect::MySql,
                Dialect::Postgres,
                "`email` is null or (length(`email`) > 3 and `a` + 1 * 2 <> 0)"
            ),
            "email IS NULL OR octet_length(email) > 3 AND a + 1 * 2 <> 0"
        );
        assert_eq!(
            via(
                Dialect::Oracle,
                Dialect::MySql,
                "(a + b) * 2 > mod(c, 3) and not (x = 1 or y = 2)"
            ),
            "(A + B) * 2 > C % 3 AND NOT (X = 1 OR Y = 2)"
        );
        assert_eq!(
            via(
                Dialect::Postgres,
                Dialect::Oracle,
                "a % 2 = 0 AND b || c <> 'x'"
            ),
            "MOD(a, 2) = 0 AND b || c <> 'x'"
        );
        assert_eq!(
            via(Dialect::Postgres, Dialect::MySql, "b || c <> 'x'"),
            "CONCAT(b, c) <> 'x'"
        );
        assert_eq!(
            via(
                Dialect::MySql,
                Dialect::Oracle,
                "x between -1 and 5 and y not in (1, 2)"
            ),
            "x BETWEEN -1 AND 5 AND y NOT IN (1, 2)"
        );
    }

    #[test]
    fn outside_the_subset_stays_text() {
        assert!(parse(Dialect::Postgres, "a ~* '^x'").is_none());
        assert!(parse(Dialect::MySql, "a in (select 1)").is_none());
        assert!(parse(Dialect::MySql, "json_valid(`attrs`)").is_none());
        // Parentheses around the whole expression mean nothing, however many...
        let wrapped = format!("{}a > 1{}", "(".repeat(500), ")".repeat(500));
        assert!(parse(Dialect::MySql, &wrapped).is_some());
        // ...but nesting inside it beyond the parser's limit stays text.
        let deep = format!("a > {}1{}", "(".repeat(500), ")".repeat(500));
        assert!(parse(Dialect::MySql, &deep).is_none());
    }
}
