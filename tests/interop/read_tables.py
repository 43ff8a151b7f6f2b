"""Read lakeshift's Iceberg tables with readers that are not ours.

usage: read_tables.py WAREHOUSE CATALOG_NAME TABLE=METADATA_LOCATION...

Prints one JSON object: per table, what pyiceberg (through the SQL catalog) and DuckDB
(iceberg_scan of the metadata file) read: the schema and the rows, or the error.
"""
import glob
import json
import os
import sys


def cell(v):
    if v is None:
        return None
    return str(v)


def pyiceberg_read(warehouse, name, table):
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog(
        name,
        uri=f"sqlite:///{os.path.join(warehouse, 'catalog.db')}",
        warehouse=f"file://{warehouse}",
    )
    t = cat.load_table(table)
    fields = [
        [f.field_id, f.name, str(f.field_type), f.required]
        for f in t.schema().fields
    ]
    out = {
        "fields": fields,
        "identifier_field_ids": sorted(t.schema().identifier_field_ids),
    }
    try:
        arrow = t.scan().to_arrow()
        out["rows"] = sorted(
            [[cell(v) for v in row.values()] for row in arrow.to_pylist()],
            key=lambda r: [x or "" for x in r],
        )
        out["columns"] = arrow.column_names
    except Exception as e:  # reported, not hidden
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def duckdb_read(metadata):
    import duckdb

    ext = glob.glob(
        os.path.join(
            os.path.dirname(duckdb.__file__),
            "..",
            "duckdb_ext",
            "extensions",
            "*",
            "*",
        )
    )
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for name in ["parquet", "avro", "iceberg"]:
        path = [
            p
            for d in ext
            for p in glob.glob(os.path.join(d, f"{name}.duckdb_extension"))
        ]
        con.execute(f"LOAD '{path[0]}'")
    try:
        rel = con.execute(f"SELECT * FROM iceberg_scan('{metadata}')")
        cols = [d[0] for d in rel.description]
        rows = [[cell(v) for v in r] for r in rel.fetchall()]
        rows.sort(key=lambda r: [x or "" for x in r])
        return {"columns": cols, "rows": rows}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    warehouse, name = sys.argv[1], sys.argv[2]
    result = {}
    for arg in sys.argv[3:]:
        table, metadata = arg.split("=", 1)
        entry = {}
        try:
            entry["pyiceberg"] = pyiceberg_read(warehouse, name, table)
        except Exception as e:
            entry["pyiceberg"] = {"error": f"{type(e).__name__}: {e}"}
        entry["duckdb"] = duckdb_read(metadata)
        result[table] = entry
    print(json.dumps(result))


main()
