//! Neutral boolean expressions: the common subset of CHECK constraints that every
//! dialect can state (comparisons, IN, BETWEEN, LIKE, IS [NOT] NULL, AND/OR/NOT,
//! arithmetic, literals, column references and a few string functions). Dialects
//! parse their own spelling into this and print it back in theirs; what falls outside
//! the subset stays dialect-tagged text (see [`crate::Check`]).

use crate::schema::Literal;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    And,
    Or,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    /// String concatenation (`||`, MySQL `CONCAT`).
    Concat,
}

impl BinaryOp {
    /// Binding strength: higher binds tighter.
    pub fn precedence(self) -> u8 {
        use BinaryOp::*;
        match self {
            Or => 1,
            And => 2,
            Eq | NotEq | Lt | LtEq | Gt | GtEq => 4,
            Add | Sub | Concat => 5,
            Mul | Div | Mod => 6,
        }
    }
}

/// Functions with one meaning in every dialect, each spelled per dialect by emitters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Func {
    /// Length in characters.
    CharLength,
    /// Length in bytes.
    OctetLength,
    Lower,
    Upper,
    Trim,
    Abs,
    Coalesce,
    /// `(text, pattern)`: the text matches the regular expression (PostgreSQL `~`,
    /// MySQL `REGEXP`, Oracle `REGEXP_LIKE`; their pattern syntaxes differ in places).
    RegexpMatch,
}

/// The kind of a typed literal (`DATE '2020-01-01'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TypedKind {
    Date,
    Time,
    Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "node", rename_all = "snake_case")]
pub enum Expr {
    /// A column of the table, named as the source stores it.
    Column {
        name: String,
    },
    Literal {
        value: Literal,
    },
    Typed {
        kind: TypedKind,
        value: String,
    },
    Not {
        expr: Box<Expr>,
    },
    Neg {
        expr: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        escape: Option<String>,
        negated: bool,
    },
    Function {
        func: Func,
        args: Vec<Expr>,
    },
}

impl Expr {
    pub fn column(name: &str) -> Self {
        Expr::Column {
            name: name.to_owned(),
        }
    }

    /// Every column the expression reads, in order of appearance.
    pub fn columns(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Column { name } = e {
                if !out.contains(&name.as_str()) {
                    out.push(name.as_str());
                }
            }
        });
        out
    }

    /// The expression with column `from` renamed to `to` (a domain's `VALUE` becomes
    /// the column the domain types; a column rename follows into its checks).
    pub fn rename_column(&mut self, from: &str, to: &str) {
        self.visit_mut(&mut |e| {
            if let Expr::Column { name } = e {
                if name == from {
                    *name = to.to_owned();
                }
            }
        });
    }

    fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Column { .. } | Expr::Literal { .. } | Expr::Typed { .. } => Vec::new(),
            Expr::Not { expr } | Expr::Neg { expr } | Expr::IsNull { expr, .. } => vec![expr],
            Expr::Binary { left, right, .. } => vec![left, right],
            Expr::InList { expr, list, .. } => {
                let mut v = vec![expr.as_ref()];
                v.extend(list.iter());
                v
            }
            Expr::Between {
                expr, low, high, ..
            } => vec![expr, low, high],
            Expr::Like { expr, pattern, .. } => vec![expr, pattern],
            Expr::Function { args, .. } => args.iter().collect(),
        }
    }

    /// Call `f` on the expression and every expression inside it.
    pub fn visit<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        // An explicit stack: a deeply nested expression cannot overflow the call stack.
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            f(e);
            stack.extend(e.children().into_iter().rev());
        }
    }

    /// Call `f` on the expression and every expression inside it, to change them.
    pub fn visit_mut(&mut self, f: &mut impl FnMut(&mut Expr)) {
        let mut stack: Vec<&mut Expr> = vec![self];
        while let Some(e) = stack.pop() {
            f(e);
            match e {
                Expr::Column { .. } | Expr::Literal { .. } | Expr::Typed { .. } => {}
                Expr::Not { expr } | Expr::Neg { expr } | Expr::IsNull { expr, .. } => {
                    stack.push(expr)
                }
                Expr::Binary { left, right, .. } => {
                    stack.push(left);
                    stack.push(right);
                }
                Expr::InList { expr, list, .. } => {
                    stack.push(expr);
                    stack.extend(list.iter_mut());
                }
                Expr::Between {
                    expr, low, high, ..
                } => {
                    stack.push(expr);
                    stack.push(low);
                    stack.push(high);
                }
                Expr::Like { expr, pattern, .. } => {
                    stack.push(expr);
                    stack.push(pattern);
                }
                Expr::Function { args, .. } => stack.extend(args.iter_mut()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_and_renames() {
        let mut e = Expr::Binary {
            op: BinaryOp::And,
            left: Box::new(Expr::IsNull {
                expr: Box::new(Expr::column("value")),
                negated: true,
            }),
            right: Box::new(Expr::Binary {
                op: BinaryOp::Gt,
                left: Box::new(Expr::column("value")),
                right: Box::new(Expr::column("floor")),
            }),
        };
        assert_eq!(e.columns(), ["value", "floor"]);
        e.rename_column("value", "height");
        assert_eq!(e.columns(), ["height", "floor"]);
    }
}
