//! Keys and constraints read back from a real server's catalog, in one shape for both
//! servers so a source schema and its translation can be compared: primary keys,
//! unique keys (constraints and unique indexes), foreign keys with their delete
//! action, and CHECK constraints by name. Names of tables, columns and checks are
//! lower-cased; the referenced table is named without its schema.

use std::collections::BTreeSet;

/// (table, columns, referenced table, referenced columns, delete action)
pub type ForeignKeyFact = (String, Vec<String>, String, Vec<String>, String);

/// A foreign key being read: (table, name, columns, referenced table, referenced
/// columns, delete action).
type Reading = (String, String, Vec<String>, String, Vec<String>, String);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Constraints {
    /// (table, columns in key order)
    pub primary: BTreeSet<(String, Vec<String>)>,
    /// (table, columns in key order)
    pub unique: BTreeSet<(String, Vec<String>)>,
    pub foreign: BTreeSet<ForeignKeyFact>,
    /// (table, check name)
    pub checks: BTreeSet<(String, String)>,
}

impl Constraints {
    /// Counts per kind: primary, unique, foreign, check.
    pub fn counts(&self) -> [usize; 4] {
        [
            self.primary.len(),
            self.unique.len(),
            self.foreign.len(),
            self.checks.len(),
        ]
    }
}

/// NO ACTION and RESTRICT differ only for deferred checks, which neither side uses.
fn action(a: &str) -> String {
    match a.to_ascii_uppercase().as_str() {
        "NO ACTION" | "RESTRICT" => "RESTRICT".into(),
        other => other.to_owned(),
    }
}

pub async fn mysql_constraints(conn: &mut mysql_async::Conn, db: &str) -> Constraints {
    use mysql_async::prelude::Queryable;
    let mut out = Constraints::default();
    // Generated columns that stand for a partial unique index's column
    // (`CASE WHEN cond THEN col END`) are read as the column they hold.
    let generated: Vec<(String, String, String)> = conn
        .exec(
            "SELECT TABLE_NAME, COLUMN_NAME, GENERATION_EXPRESSION FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? AND GENERATION_EXPRESSION IS NOT NULL AND GENERATION_EXPRESSION <> ''",
            (db,),
        )
        .await
        .expect("generated columns");
    let held = |t: &str, c: &str| -> String {
        generated
            .iter()
            .find(|(gt, gc, _)| gt == t && gc == c)
            .and_then(|(_, _, e)| {
                let up = e.to_ascii_uppercase();
                let p = up.find(" THEN ")?;
                let rest = e[p + 6..].trim_start();
                let end = rest.find(|ch: char| ch.is_whitespace())?;
                Some(rest[..end].trim_matches('`').to_owned())
            })
            .unwrap_or_else(|| c.to_owned())
            .to_lowercase()
    };
    let rows: Vec<(String, String, i64, String)> = conn
        .exec(
            "SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
            (db,),
        )
        .await
        .expect("statistics");
    let mut keys: Vec<(String, String, bool, Vec<String>)> = Vec::new();
    for (t, ix, non_unique, c) in rows {
        let c = held(&t, &c);
        match keys.last_mut() {
            Some(k) if k.0 == t && k.1 == ix => k.3.push(c),
            _ => keys.push((t, ix, non_unique == 0, vec![c])),
        }
    }
    for (t, ix, unique, cols) in keys {
        let t = t.to_lowercase();
        if ix == "PRIMARY" {
            out.primary.insert((t, cols));
        } else if unique {
            out.unique.insert((t, cols));
        }
    }
    let fks: Vec<(String, String, String, String, String, String)> = conn
        .exec(
            "SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME, \
                    k.REFERENCED_COLUMN_NAME, r.DELETE_RULE \
             FROM information_schema.KEY_COLUMN_USAGE k \
             JOIN information_schema.REFERENTIAL_CONSTRAINTS r \
               ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME \
              AND r.TABLE_NAME = k.TABLE_NAME \
             WHERE k.TABLE_SCHEMA = ? AND k.REFERENCED_TABLE_NAME IS NOT NULL \
             ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION",
            (db,),
        )
        .await
        .expect("foreign keys");
    let mut cur: Option<Reading> = None;
    let mut flush = |c: Option<Reading>| {
        if let Some((t, _, cols, rt, rcols, a)) = c {
            out.foreign.insert((t, cols, rt, rcols, action(&a)));
        }
    };
    for (t, name, c, rt, rc, a) in fks {
        let (t, c, rt, rc) = (
            t.to_lowercase(),
            c.to_lowercase(),
            rt.to_lowercase(),
            rc.to_lowercase(),
        );
        match &mut cur {
            Some(k) if k.0 == t && k.1 == name => {
                k.2.push(c);
                k.4.push(rc);
            }
            _ => {
                flush(cur.take());
                cur = Some((t, name, vec![c], rt, vec![rc], a));
            }
        }
    }
    flush(cur.take());
    let checks: Vec<(String, String)> = conn
        .exec(
            "SELECT TABLE_NAME, CONSTRAINT_NAME FROM information_schema.CHECK_CONSTRAINTS \
             WHERE CONSTRAINT_SCHEMA = ? AND LEVEL = 'Table'",
            (db,),
        )
        .await
        .expect("checks");
    for (t, n) in checks {
        out.checks.insert((t.to_lowercase(), n.to_lowercase()));
    }
    out
}

pub async fn pg_constraints(client: &tokio_postgres::Client, schema: &str) -> Constraints {
    let mut out = Constraints::default();
    let cols_of =
        "ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(n, o) \
                   JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n ORDER BY k.o)";
    let rows = client
        .query(
            &format!(
                "SELECT c.relname::text, i.indisprimary, {cols_of} FROM pg_index i \
                 JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND i.indisunique AND 0 <> ALL (i.indkey::int2[])"
            ),
            &[&schema],
        )
        .await
        .expect("indexes");
    for r in rows {
        let t: String = r.get(0);
        let cols: Vec<String> = r.get(2);
        let cols = cols.into_iter().map(|c| c.to_lowercase()).collect();
        if r.get::<_, bool>(1) {
            out.primary.insert((t.to_lowercase(), cols));
        } else {
            out.unique.insert((t.to_lowercase(), cols));
        }
    }
    let rows = client
        .query(
            "SELECT c.relname::text, \
                    ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY x(n, o) \
                          JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = x.n ORDER BY x.o), \
                    rc.relname::text, \
                    ARRAY(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY x(n, o) \
                          JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = x.n ORDER BY x.o), \
                    k.confdeltype::text \
             FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid \
             JOIN pg_class rc ON rc.oid = k.confrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND k.contype = 'f'",
            &[&schema],
        )
        .await
        .expect("foreign keys");
    for r in rows {
        let a = match r.get::<_, String>(4).as_str() {
            "c" => "CASCADE",
            "n" => "SET NULL",
            "d" => "SET DEFAULT",
            _ => "RESTRICT",
        };
        let low = |v: Vec<String>| v.into_iter().map(|c| c.to_lowercase()).collect();
        out.foreign.insert((
            r.get::<_, String>(0).to_lowercase(),
            low(r.get(1)),
            r.get::<_, String>(2).to_lowercase(),
            low(r.get(3)),
            a.into(),
        ));
    }
    let rows = client
        .query(
            "SELECT c.relname::text, k.conname::text FROM pg_constraint k \
             JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND k.contype = 'c'",
            &[&schema],
        )
        .await
        .expect("checks");
    for r in rows {
        out.checks.insert((
            r.get::<_, String>(0).to_lowercase(),
            r.get::<_, String>(1).to_lowercase(),
        ));
    }
    out
}
