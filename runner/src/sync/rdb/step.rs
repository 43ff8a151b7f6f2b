//! What a checkpoint sends to a relational target: SQL that holds no value, rows
//! loaded into staging tables with `COPY` (PostgreSQL), and prepared statements with
//! their parameters (MySQL's binary protocol). Values never become SQL text, so no
//! value can be read as SQL whatever the session's quoting rules.
//!
//! PostgreSQL: a table's rows go into a temporary table (the target's columns, made
//! with `CREATE TEMP TABLE ... AS SELECT ... WITH NO DATA`, dropped at commit) by
//! `COPY FROM STDIN`, then one set-based statement applies them: `DELETE ... USING`,
//! `INSERT ... SELECT ... ON CONFLICT`, or for keyless tables a delete of as many
//! equal rows as were deleted. MySQL: multi-row statements with `?` placeholders.

use super::render::{ColSpec, Row, RowBuf, Val};
use dialects::Dialect;
use std::fmt::Write as _;
use std::io::Write as _;

/// A helper column's or alias's name (`"lakeshift.<base>"`), unlike every one of
/// `cols` (quoted as the target writes them): a table may have a column of that name.
pub(super) fn aux(cols: &[&str], base: &str) -> String {
    let mut n = format!("\"lakeshift.{base}\"");
    let mut i = 1;
    while cols.contains(&n.as_str()) {
        i += 1;
        n = format!("\"lakeshift.{base}{i}\"");
    }
    n
}

/// What MySQL says when an upsert's unique index matched a row of another key (its
/// key set to NULL by the statement's guard; a source row's key is never NULL).
pub(super) const KEY_GUARD: &str = "cannot be null";

/// Most placeholders one MySQL statement takes.
const MAX_PARAMS: usize = 65_535;

/// One thing a checkpoint runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum Step {
    /// SQL without values.
    Sql(String),
    /// PostgreSQL: `COPY stage (cols, ord) FROM STDIN` of these rows (each row's
    /// index is its order).
    Copy { copy: String, rows: Vec<Row> },
    /// PostgreSQL: `COPY table (cols) FROM STDIN` of rows straight into the target
    /// table (rows of keys it does not hold).
    Load { load: String, rows: Vec<Row> },
    /// A statement with placeholders and its parameters (in order).
    Exec { sql: String, params: Row },
}

impl Step {
    /// The statement for messages: its SQL, never its values.
    pub fn shape(&self) -> String {
        match self {
            Step::Sql(s) => super::write::clip(s),
            Step::Copy { copy: sql, rows } | Step::Load { load: sql, rows } => {
                format!("{sql} ({} rows)", rows.len())
            }
            Step::Exec { sql, params } => {
                format!(
                    "{} ({} parameters)",
                    super::write::clip(sql),
                    params.vals().count()
                )
            }
        }
    }

    /// A statement whose placeholders take `params` (none: plain SQL).
    pub fn with(sql: String, params: &Row) -> Step {
        if params.is_empty() {
            Step::Sql(sql)
        } else {
            Step::Exec {
                sql,
                params: params.clone(),
            }
        }
    }
}

/// Rows as `COPY` text: tab-separated, `\N` for NULL, backslash escapes for
/// backslash, tab, newline and carriage return; the row's index last when given.
pub fn copy_text(out: &mut Vec<u8>, row: &Row, ord: Option<usize>) {
    for (i, c) in row.vals().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        match c {
            Val::Null | Val::Default => out.extend_from_slice(b"\\N"),
            Val::Int(v) => {
                let _ = write!(out, "{v}");
            }
            Val::UInt(v) => {
                let _ = write!(out, "{v}");
            }
            Val::Float(v) => {
                let _ = write!(out, "{v:?}");
            }
            Val::Text(s) => escape(out, s.as_bytes()),
            Val::Bytes(b) => {
                out.extend_from_slice(b"\\\\x");
                for x in b.iter() {
                    let _ = write!(out, "{x:02x}");
                }
            }
        }
    }
    match ord {
        Some(ord) => {
            let _ = writeln!(out, "\t{ord}");
        }
        None => out.push(b'\n'),
    }
}

fn escape(out: &mut Vec<u8>, mut s: &[u8]) {
    while let Some(i) = s
        .iter()
        .position(|b| matches!(b, b'\\' | b'\t' | b'\n' | b'\r'))
    {
        out.extend_from_slice(&s[..i]);
        out.extend_from_slice(match s[i] {
            b'\\' => b"\\\\",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            _ => b"\\r",
        });
        s = &s[i + 1..];
    }
    out.extend_from_slice(s);
}

/// The statements of one checkpoint for one dialect; names its staging tables.
pub struct Plan {
    pub dialect: Dialect,
    /// Staging table names: `lakeshift_stage_<checkpoint>_<n>`.
    checkpoint: u64,
    staged: usize,
    /// MySQL: rows per statement and bytes of values per statement.
    rows: usize,
    bytes: usize,
    /// PostgreSQL: the staging tables of the table being planned, by table and
    /// column list: name and the index of its COPY among the staging steps. Each run of a keyless
    /// table's changes takes a range of one staging table's rows (a table per run
    /// held a lock each: thousands of small transactions in one checkpoint ran out of
    /// the server's lock table).
    staging: Vec<(String, String, usize)>,
}

/// A table's columns as the plan writes them.
pub struct Cols<'a> {
    pub table: &'a str,
    pub cols: &'a [ColSpec],
    /// Indexes of the key columns in `cols` (empty: keyless).
    pub key: &'a [usize],
}

impl<'a> Cols<'a> {
    /// The key columns' names, quoted for the target.
    pub fn key_names(&self) -> Vec<&'a str> {
        self.key
            .iter()
            .map(|i| self.cols[*i].ident.as_str())
            .collect()
    }
}

impl Plan {
    pub fn new(dialect: Dialect, checkpoint: u64, rows: usize, bytes: usize) -> Plan {
        Plan {
            dialect,
            checkpoint,
            staged: 0,
            rows: rows.max(1),
            bytes,
            staging: Vec::new(),
        }
    }

    /// Planning of another table begins (its staging steps are a list of their own).
    pub fn begin_table(&mut self) {
        self.staging.clear();
    }

    fn pg(&self) -> bool {
        self.dialect == Dialect::Postgres
    }

    /// PostgreSQL: `rows` staged in a temporary table with `cols` of `table` (and the
    /// order column), dropped at commit: made on the first use of these columns for
    /// the table, loaded further on later ones. Returns its name, its order column's,
    /// and the range of orders of these rows (each row's order is its index among
    /// the table's staged rows).
    fn stage(
        &mut self,
        table: &str,
        cols: &[&str],
        rows: Vec<Row>,
        out: &mut Vec<Step>,
    ) -> (String, String, std::ops::Range<usize>) {
        let ord = aux(cols, "ord");
        let list = cols.join(", ");
        let n = rows.len();
        let key = format!("{table} ({list})");
        let found = self
            .staging
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|(_, s, i)| (s.clone(), *i));
        if let Some((s, i)) = found {
            if let Some(Step::Copy { rows: staged, .. }) = out.get_mut(i) {
                let from = staged.len();
                staged.extend(rows);
                return (s, ord, from..from + n);
            }
        }
        self.staged += 1;
        let s = format!("lakeshift_stage_{}_{}", self.checkpoint, self.staged);
        out.push(Step::Sql(format!(
            "CREATE TEMP TABLE {s} ON COMMIT DROP AS SELECT {list}, 0::bigint AS {ord} FROM {table} WITH NO DATA"
        )));
        self.staging.push((key, s.clone(), out.len()));
        out.push(Step::Copy {
            copy: format!("COPY {s} ({list}, {ord}) FROM STDIN"),
            rows,
        });
        (s, ord, 0..n)
    }

    /// MySQL: consecutive runs of rows that fit one statement.
    fn runs<'r>(&self, rows: &'r [Row]) -> Vec<&'r [Row]> {
        let width = rows.first().map_or(1, |r| r.vals().count().max(1));
        let most = self.rows.min(MAX_PARAMS / width).max(1);
        let budget = self.bytes / 2;
        let mut out = Vec::new();
        let (mut start, mut size) = (0, 0);
        for (i, r) in rows.iter().enumerate() {
            let n = r.size();
            if i > start && (i - start >= most || size + n > budget) {
                out.push(&rows[start..i]);
                start = i;
                size = 0;
            }
            size += n;
        }
        if start < rows.len() {
            out.push(&rows[start..]);
        }
        out
    }

    /// Delete the rows with these keys (tuples of the key columns).
    pub fn delete_keys(
        &mut self,
        t: &Cols<'_>,
        keys: Vec<Row>,
        stage: &mut Vec<Step>,
        out: &mut Vec<Step>,
    ) {
        if keys.is_empty() {
            return;
        }
        let names = t.key_names();
        if self.pg() {
            let (s, ord, r) = self.stage(t.table, &names, keys, stage);
            let on: Vec<String> = names.iter().map(|n| format!("t.{n} = s.{n}")).collect();
            out.push(Step::Sql(format!(
                "DELETE FROM {} AS t USING {s} AS s WHERE {} AND s.{ord} >= {} AND s.{ord} < {}",
                t.table,
                on.join(" AND "),
                r.start,
                r.end
            )));
            return;
        }
        for run in self.runs(&keys) {
            let (cond, params) = self.key_in(&names, run);
            out.push(Step::Exec {
                sql: format!("DELETE FROM {} WHERE {cond}", t.table),
                params,
            });
        }
    }

    /// MySQL: `k IN (?, ?)` or `(k1, k2) IN ((?, ?), (?, ?))` over these keys, and
    /// the keys as parameters.
    pub fn key_in(&self, names: &[&str], keys: &[Row]) -> (String, Row) {
        let marks = vec!["?"; names.len()].join(", ");
        let one = if names.len() == 1 {
            marks
        } else {
            format!("({marks})")
        };
        let list = vec![one.as_str(); keys.len()];
        let lhs = if names.len() == 1 {
            names[0].to_owned()
        } else {
            format!("({})", names.join(", "))
        };
        let mut params = RowBuf::default();
        for k in keys {
            params.extend(k);
        }
        (format!("{lhs} IN ({})", list.join(", ")), params.finish())
    }

    /// The condition `(key columns) IN (the deleted keys)` for statements that act on
    /// them (foreign-key actions), with its parameters; PostgreSQL stages the keys.
    /// One condition per run of keys.
    pub fn keys_condition(
        &mut self,
        table: &str,
        names: &[&str],
        keys: Vec<Row>,
        stage: &mut Vec<Step>,
    ) -> Vec<(String, Row)> {
        if self.pg() {
            // (Staged apart from the table's other steps: a list of its own.)
            self.begin_table();
            let (s, ord, r) = self.stage(table, names, keys, stage);
            self.begin_table();
            let list = names.join(", ");
            return vec![(
                format!(
                    "({list}) IN (SELECT {list} FROM {s} WHERE {ord} >= {} AND {ord} < {})",
                    r.start, r.end
                ),
                Row::default(),
            )];
        }
        self.runs(&keys)
            .into_iter()
            .map(|run| self.key_in(names, run))
            .collect()
    }

    /// Insert rows (every column of `t`, `Val::Default` where the source lacks one),
    /// replacing rows with the same key when `t` has one.
    pub fn insert(
        &mut self,
        t: &Cols<'_>,
        rows: Vec<Row>,
        stage: &mut Vec<Step>,
        out: &mut Vec<Step>,
    ) {
        self.insert_as(t, rows, stage, out, true)
    }

    /// [`Plan::insert`]; `replace`: false where the target holds no row of these
    /// keys (MySQL: a plain INSERT, as `ON DUPLICATE KEY UPDATE` would update
    /// another row that holds one of the new row's unique values, and lose it).
    pub fn insert_as(
        &mut self,
        t: &Cols<'_>,
        rows: Vec<Row>,
        stage: &mut Vec<Step>,
        out: &mut Vec<Step>,
        replace: bool,
    ) {
        if rows.is_empty() {
            return;
        }
        if !self.pg() {
            for run in self.runs(&rows) {
                let mut sql = format!("INSERT INTO {} ({}) VALUES ", t.table, idents(t.cols));
                let mut params = RowBuf::default();
                for (i, r) in run.iter().enumerate() {
                    sql.push_str(if i == 0 { "(" } else { ", (" });
                    for (j, c) in r.vals().enumerate() {
                        if j > 0 {
                            sql.push_str(", ");
                        }
                        if c == Val::Default {
                            sql.push_str("DEFAULT");
                        } else {
                            sql.push('?');
                            params.push(c);
                        }
                    }
                    sql.push(')');
                }
                if !t.key.is_empty() && replace {
                    sql.push_str(" ON DUPLICATE KEY UPDATE ");
                    // The row a unique index matched may hold another key (the
                    // target differs from the source there): updating it would lose
                    // this row and overwrite that one. Its key is set to NULL then,
                    // which fails the statement (strict mode; see `KEY_GUARD`), and
                    // the checkpoint runs again with its keys deleted first.
                    let same: Vec<String> = t
                        .key
                        .iter()
                        .map(|&i| format!("{0} <=> VALUES({0})", t.cols[i].ident))
                        .collect();
                    let k = &t.cols[t.key[0]].ident;
                    let _ = write!(sql, "{k} = IF({}, {k}, NULL)", same.join(" AND "));
                    // (A column the target computes is never assigned.)
                    for i in 0..t.cols.len() {
                        if !t.key.contains(&i) && !t.cols[i].computed {
                            let _ = write!(sql, ", {0} = VALUES({0})", t.cols[i].ident);
                        }
                    }
                }
                out.push(Step::Exec {
                    sql,
                    params: params.finish(),
                });
            }
            return;
        }
        for (present, rows) in by_columns(rows) {
            let names: Vec<&str> = present.iter().map(|i| t.cols[*i].ident.as_str()).collect();
            let (s, ord, r) = self.stage(t.table, &names, rows, stage);
            let picked = format!("{ord} >= {} AND {ord} < {}", r.start, r.end);
            let list = names.join(", ");
            // (The source's values of an identity column GENERATED ALWAYS too.)
            let mut sql = format!(
                "INSERT INTO {} ({list}) OVERRIDING SYSTEM VALUE SELECT {list} FROM {s} WHERE {picked} ORDER BY {ord}",
                t.table
            );
            if !t.key.is_empty() {
                let keys = t.key_names();
                let _ = write!(sql, " ON CONFLICT ({}) DO ", keys.join(", "));
                let sets: Vec<String> = (0..t.cols.len())
                    .filter(|i| !t.key.contains(i))
                    .map(|i| {
                        let n = &t.cols[i].ident;
                        if present.contains(&i) {
                            format!("{n} = EXCLUDED.{n}")
                        } else {
                            format!("{n} = DEFAULT")
                        }
                    })
                    .collect();
                if sets.is_empty() {
                    sql.push_str("NOTHING");
                } else {
                    sql.push_str("UPDATE SET ");
                    sql.push_str(&sets.join(", "));
                }
            }
            out.push(Step::Sql(sql));
        }
    }

    /// PostgreSQL: rows of keys the target does not hold, copied straight into the
    /// table (no staging, no conflict handling: a key that is there after all makes
    /// the COPY fail with a unique violation, and the checkpoint runs again the
    /// general way). MySQL: a plain INSERT, which fails the same way.
    pub fn load(&mut self, t: &Cols<'_>, rows: Vec<Row>, out: &mut Vec<Step>) {
        if rows.is_empty() {
            return;
        }
        if !self.pg() {
            return self.insert_as(t, rows, &mut Vec::new(), out, false);
        }
        for (present, rows) in by_columns(rows) {
            let names: Vec<&str> = present.iter().map(|i| t.cols[*i].ident.as_str()).collect();
            out.push(Step::Load {
                load: format!("COPY {} ({}) FROM STDIN", t.table, names.join(", ")),
                rows,
            });
        }
    }

    /// Keyless tables: delete one row equal to each of `rows` (in the columns the
    /// source has; NULL equal to NULL), as many as there are equal rows in `rows`.
    pub fn delete_rows(
        &mut self,
        t: &Cols<'_>,
        rows: Vec<Row>,
        stage: &mut Vec<Step>,
        out: &mut Vec<Step>,
    ) {
        if rows.is_empty() {
            return;
        }
        if !self.pg() {
            for r in rows {
                let mut cond = Vec::new();
                let mut params = RowBuf::default();
                for (c, v) in t.cols.iter().zip(r.vals()) {
                    if v != Val::Default {
                        cond.push(format!("{} <=> ?", c.ident));
                        params.push(v);
                    }
                }
                out.push(Step::Exec {
                    sql: format!(
                        "DELETE FROM {} WHERE {} LIMIT 1",
                        t.table,
                        cond.join(" AND ")
                    ),
                    params: params.finish(),
                });
            }
            return;
        }
        for (present, rows) in by_columns(rows) {
            let names: Vec<&str> = present.iter().map(|i| t.cols[*i].ident.as_str()).collect();
            let (s, ord, r) = self.stage(t.table, &names, rows, stage);
            let picked = format!("{ord} >= {} AND {ord} < {}", r.start, r.end);
            let mut taken = names.clone();
            taken.push(&ord);
            let count = aux(&taken, "count");
            taken.push(&count);
            let n = aux(&taken, "n");
            // Compared as text: some types have no equality operator (json, xml,
            // the geometric ones), and equal values of one column type print alike.
            let on: Vec<String> = names
                .iter()
                .map(|n| format!("t.{n}::text IS NOT DISTINCT FROM s.{n}"))
                .collect();
            let grouped: Vec<String> = names.iter().map(|n| format!("{n}::text AS {n}")).collect();
            // Each group of equal staged rows: its count, and the target's equal rows
            // numbered; the first `count` of them go.
            out.push(Step::Sql(format!(
                "DELETE FROM {table} WHERE ctid IN (SELECT x.ctid FROM (SELECT t.ctid, s.{count}, row_number() OVER (PARTITION BY s.{ord}) AS {n} FROM {table} AS t JOIN (SELECT {grouped}, count(*) AS {count}, min({ord}) AS {ord} FROM {s} WHERE {picked} GROUP BY {positions}) AS s ON {on}) AS x WHERE x.{n} <= x.{count})",
                table = t.table,
                grouped = grouped.join(", "),
                positions = (1..=names.len()).map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
                on = on.join(" AND ")
            )));
        }
    }
}

fn idents(cols: &[ColSpec]) -> String {
    cols.iter()
        .map(|c| c.ident.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rows grouped by the columns they have (`Val::Default` marks one they lack), each
/// group's rows cut down to those columns, in order of first appearance.
fn by_columns(rows: Vec<Row>) -> Vec<(Vec<usize>, Vec<Row>)> {
    let width = rows.first().map_or(0, |r| r.vals().count());
    if !rows.iter().any(Row::has_default) {
        return vec![((0..width).collect(), rows)];
    }
    let mut groups: Vec<(Vec<usize>, Vec<Row>)> = Vec::new();
    for r in rows {
        let present: Vec<usize> = r
            .vals()
            .enumerate()
            .filter(|(_, v)| *v != Val::Default)
            .map(|(i, _)| i)
            .collect();
        let cut = Row::of(r.vals().filter(|v| *v != Val::Default));
        match groups.iter_mut().find(|(p, _)| *p == present) {
            Some((_, g)) => g.push(cut),
            None => groups.push((present, vec![cut])),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_text_escapes_what_copy_reads_specially() {
        let mut out = Vec::new();
        copy_text(
            &mut out,
            &Row::of([Val::Text("a\tb\nc\\d\re'"), Val::Null, Val::Int(-3)]),
            Some(7),
        );
        assert_eq!(out, b"a\\tb\\nc\\\\d\\re'\t\\N\t-3\t7\n");
        out.clear();
        copy_text(&mut out, &Row::of([Val::Int(1), Val::Null]), None);
        assert_eq!(out, b"1\t\\N\n");
    }

    #[test]
    fn held_steps_read_back_and_plain_strings_are_sql() {
        let steps = vec![
            Step::Sql("DELETE FROM t".into()),
            Step::Copy {
                copy: "COPY s (a) FROM STDIN".into(),
                rows: vec![Row::of([Val::Text("x"), Val::Bytes(&[0, 255])])],
            },
            Step::Exec {
                sql: "DELETE FROM t WHERE a <=> ?".into(),
                params: Row::of([Val::Float(1.5), Val::UInt(u64::MAX)]),
            },
        ];
        let json = serde_json::to_string(&steps).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Step>>(&json).unwrap(), steps);
        // Statements held by an earlier version were strings.
        let old: Vec<Step> = serde_json::from_str(r#"["INSERT INTO t VALUES (1)"]"#).unwrap();
        assert_eq!(old, vec![Step::Sql("INSERT INTO t VALUES (1)".into())]);
    }

    #[test]
    fn helper_names_avoid_the_tables_own_columns() {
        // regression: a column named "lakeshift.ord" collided with the staging table's
        // order column (CREATE TABLE AS failed on every checkpoint).
        assert_eq!(aux(&["a", "b"], "ord"), "\"lakeshift.ord\"");
        assert_eq!(
            aux(&["\"lakeshift.ord\"", "\"lakeshift.ord2\""], "ord"),
            "\"lakeshift.ord3\""
        );
        let spec: Vec<ColSpec> = [
            "\"lakeshift.ord\"",
            "\"lakeshift.count\"",
            "\"lakeshift.n\"",
        ]
        .iter()
        .map(|n| ColSpec {
            ident: (*n).to_owned(),
            ..ColSpec::default()
        })
        .collect();
        let t = Cols {
            table: "d.t",
            cols: &spec,
            key: &[],
        };
        let mut p = Plan::new(Dialect::Postgres, 1, 1000, 1 << 20);
        let (mut stage, mut out) = (Vec::new(), Vec::new());
        let row = Row::of([Val::Text("1"), Val::Text("2"), Val::Text("3")]);
        p.delete_rows(&t, vec![row], &mut stage, &mut out);
        let Step::Sql(create) = &stage[0] else {
            panic!("{stage:?}")
        };
        assert!(create.contains("AS \"lakeshift.ord2\" FROM"), "{create}");
        let Step::Sql(delete) = &out[0] else {
            panic!("{out:?}")
        };
        assert!(
            delete.contains("count(*) AS \"lakeshift.count2\"")
                && delete.contains("AS \"lakeshift.n2\""),
            "{delete}"
        );
    }

    #[test]
    fn mysql_statements_stay_under_the_placeholder_limit() {
        let spec: Vec<ColSpec> = (0..3)
            .map(|i| ColSpec {
                ident: format!("c{i}"),
                ..ColSpec::default()
            })
            .collect();
        let t = Cols {
            table: "d.t",
            cols: &spec,
            key: &[0],
        };
        let rows: Vec<Row> = (0..50_000)
            .map(|i| Row::of([Val::Int(i), Val::Default, Val::Text("v")]))
            .collect();
        let mut p = Plan::new(Dialect::MySql, 1, 100_000, 1 << 30);
        let (mut stage, mut out) = (Vec::new(), Vec::new());
        p.insert(&t, rows, &mut stage, &mut out);
        assert!(stage.is_empty());
        let mut total = 0;
        for s in &out {
            let Step::Exec { sql, params } = s else {
                panic!("not a prepared statement: {s:?}")
            };
            let n = params.vals().count();
            assert!(n <= MAX_PARAMS);
            assert_eq!(sql.matches('?').count(), n);
            assert!(sql.contains("DEFAULT"));
            total += n;
        }
        assert_eq!(total, 100_000);
    }
}
