//! The grammars-v4 DDL examples (tests/corpus/grammars-v4, see ORIGIN.md): every
//! statement becomes IR, is skipped with a reason, or is rejected with a positioned
//! error; none panics. The counts are printed (`cargo test -- --nocapture`).

use dialects::translate::{Target, Translator};
use dialects::Dialect;
use lakeshift_tests::workspace_root;

#[test]
fn every_statement_is_parsed_skipped_or_rejected_with_position() {
    let root = workspace_root().join("tests/corpus/grammars-v4");
    let mut total = (0, 0, 0);
    for (dir, d) in [
        ("mysql", Dialect::MySql),
        ("mariadb", Dialect::MySql),
        ("postgresql", Dialect::Postgres),
        ("plsql", Dialect::Oracle),
    ] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .expect("corpus dir")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        let (mut ok, mut skipped, mut rejected, mut unknown) = (0, 0, 0, 0);
        for f in files {
            let text = String::from_utf8_lossy(&std::fs::read(&f).expect("read")).into_owned();
            let lines = text.lines().count().max(1);
            let mut tr = Translator::new(d, Target::Ir);
            // A panic here fails the test: that is the point.
            for r in tr.translate(&text) {
                if r.failed() {
                    rejected += 1;
                    // Of those, statements on tables or columns the file never created.
                    if r.diagnostics.iter().any(|(_, _, d)| {
                        d.message.contains("not known") || d.message.contains("does not exist")
                    }) {
                        unknown += 1;
                    }
                    for (l, c, _) in &r.diagnostics {
                        assert!(
                            *l >= 1 && *l <= lines && *c >= 1,
                            "{f:?}: bad position {l}:{c}"
                        );
                    }
                } else if r.changes.is_empty() {
                    skipped += 1;
                } else {
                    ok += 1;
                }
            }
        }
        println!(
            "grammars-v4 {dir}: {ok} to IR, {skipped} skipped, {rejected} rejected with position \
             ({unknown} of them name a table or column the file never created), 0 panics"
        );
        total = (total.0 + ok, total.1 + skipped, total.2 + rejected);
        assert!(ok > 0, "{dir}: nothing parsed");
    }
    println!(
        "grammars-v4 total: {} to IR, {} skipped, {} rejected with position, 0 panics",
        total.0, total.1, total.2
    );
}
