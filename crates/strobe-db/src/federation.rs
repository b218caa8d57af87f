//! Many profile databases read as one, in place: federated virtual tables.
//!
//! Owns [`Federation`], what a [`crate::Profile`] over more than
//! [`crate::reader::MAX_ATTACHED`] files is built on. SQLite attaches at
//! most ten databases to a connection, and one file merging every
//! process's suffixed tables stops scaling at a few hundred processes
//! (each `CREATE TABLE` rescans the whole schema, and a `UNION ALL` view
//! takes at most 500 terms), so instead every unsuffixed table view
//! (`rocpd_region`, …) and every per-process data view (`regions`,
//! `samples`, …) is a virtual table (module `strobe_fed`) whose rows are
//! the rows of that view in each process, one process after the other:
//! a scan opens one database at a time (read-only, on a connection of its
//! own), runs the view's query there, natively, with the columns SQLite
//! needs and the constraints it can use (equalities and ranges, an
//! equality on `guid` choosing the one process), and moves to the next.
//! Views whose rows combine processes (`top`, `busy`, `top_kernels`) are
//! ordinary views over these tables. Any SQL therefore means exactly what
//! it means over the same processes merged into one file; memory stays
//! within what SQLite needs for the query plus a few open databases
//! ([`POOL`]), and open files within the pool plus one per running scan.
//!
//! The per-process query of an object is the object's own view definition
//! (the same text [`crate::schema::create_views`] creates) written as
//! common table expressions over that process's suffixed tables, window
//! applied, so nothing is created in or beside an input. It never writes to
//! an input and never prints: scans report progress through a callback.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::os::raw::c_int;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use rusqlite::types::{ToSqlOutput, Value};
use rusqlite::vtab::{
    read_only_module, sqlite3_vtab, sqlite3_vtab_cursor, Context, CreateVTab, Filters,
    IndexConstraintOp, IndexInfo, VTab, VTabConnection, VTabCursor, VTabKind,
};
use rusqlite::{Connection, Row, Rows, Statement};

use crate::error::{DbError, Result, SqlContext};
use crate::inputs::open_read_only;
use crate::schema::{self, TableSet, ViewWindow};

/// Open process databases kept between scans (most recently used).
pub const POOL: usize = 8;

/// Views whose rows combine processes: ordinary views over the federated
/// tables (every other data view is federated, computed per process).
/// A new data view that aggregates across processes must be listed here
/// (`tests/federation.rs` compares every view with the same processes
/// merged into one file, and fails on one computed per process by
/// mistake).
pub const CROSS_PROCESS_VIEWS: [&str; 3] = ["top_kernels", "busy", "top"];

/// The module name the virtual tables are created with.
const MODULE: &str = "strobe_fed";

/// Objects with few rows per process (for the planner's estimates).
const SMALL: [&str; 17] = [
    "rocpd_metadata",
    "rocpd_info_node",
    "rocpd_info_process",
    "rocpd_info_thread",
    "rocpd_info_agent",
    "rocpd_info_queue",
    "rocpd_info_stream",
    "rocpd_info_pmc",
    "rocpd_info_code_object",
    "rocpd_info_kernel_symbol",
    "rocpd_track",
    "strobe_settings",
    "strobe_module",
    "strobe_metric",
    "processes",
    "threads",
    "pmc_info",
];

/// One process of the federation: the file holding it and its suffix.
#[derive(Debug, Clone)]
pub struct Unit {
    /// The database file.
    pub file: PathBuf,
    /// The process's table suffix.
    pub suffix: String,
    /// The process's guid.
    pub guid: String,
}

/// An open database file (every process it holds: a merged file holds
/// many, opened once for all of them).
pub struct UnitConn {
    /// The file.
    file: PathBuf,
    /// Optional tables each of its processes has (see
    /// [`schema::OPTIONAL_TABLES`]), by suffix, as they are asked for.
    optional: RefCell<HashMap<String, Rc<HashSet<&'static str>>>>,
    /// Read-only connection, the file as `main`.
    pub conn: Connection,
}

impl UnitConn {
    /// The optional tables process `suffix` of this file has.
    fn optional(&self, suffix: &str) -> rusqlite::Result<Rc<HashSet<&'static str>>> {
        if let Some(o) = self.optional.borrow().get(suffix) {
            return Ok(o.clone());
        }
        let o = Rc::new(optional_tables(&self.conn, suffix)?);
        self.optional
            .borrow_mut()
            .insert(suffix.to_string(), o.clone());
        Ok(o)
    }
}

/// Progress of a scan: the object scanned, processes done, processes in all.
pub type ScanProgress = dyn Fn(&str, usize, usize);

/// Many process databases as one set of virtual tables; see the module
/// documentation.
pub struct Federation {
    units: Vec<Unit>,
    by_guid: HashMap<String, usize>,
    window: Cell<ViewWindow>,
    pool: RefCell<Vec<Rc<UnitConn>>>,
    defs: Arc<Definitions>,
    progress: RefCell<Option<Box<ScanProgress>>>,
}

impl Federation {
    /// Builds the federation of `units` (at least one) and installs it on
    /// `conn`: a virtual table per table view and per-process data view,
    /// TEMP views for [`CROSS_PROCESS_VIEWS`]. The first unit serves as the
    /// template for the view definitions and columns.
    pub fn install(conn: &Connection, units: Vec<Unit>) -> Result<Rc<Federation>> {
        let Some(first) = units.first() else {
            return Err(DbError::NoInput {
                pattern: String::new(),
            });
        };
        let mem = std::path::Path::new(":memory:");
        let template = open_read_only(&first.file)?;
        schema::create_views(
            &template,
            &[TableSet {
                schema: "main".into(),
                suffix: first.suffix.clone(),
            }],
            true,
            &ViewWindow::default(),
        )
        .at(&first.file)?;
        let mut view_sql: HashMap<String, String> = HashMap::new();
        {
            let mut st = template
                .prepare("SELECT name, sql FROM temp.sqlite_master WHERE type = 'view'")
                .at(&first.file)?;
            let rows = st
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .at(&first.file)?;
            for r in rows {
                let (name, sql) = r.at(&first.file)?;
                view_sql.insert(name, sql);
            }
        }
        let mut objects: Vec<String> = schema::all_tables().map(String::from).collect();
        objects.extend(schema::OPTIONAL_TABLES.iter().map(|(t, _)| t.to_string()));
        let mut bodies = HashMap::new();
        for name in schema::DATA_VIEW_NAMES {
            let Some(sql) = view_sql.get(name) else {
                continue;
            };
            let head = format!("\"{name}\" AS");
            let Some(at) = sql.find(&head) else {
                return Err(DbError::Query {
                    message: format!("cannot read the definition of view {name}"),
                    sql: sql.clone(),
                });
            };
            bodies.insert(name.to_string(), sql[at + head.len()..].trim().to_string());
            objects.push(name.to_string());
        }
        let known: HashSet<&str> = objects.iter().map(String::as_str).collect();
        let mut deps = HashMap::new();
        for (name, body) in &bodies {
            deps.insert(name.clone(), quoted_names(body, &known));
        }
        let mut columns = HashMap::new();
        let mut types = HashMap::new();
        for o in &objects {
            let sql = format!("SELECT * FROM temp.\"{o}\" LIMIT 0");
            let st = template.prepare(&sql).at(&first.file)?;
            let cols = st.columns();
            columns.insert(
                o.clone(),
                cols.iter().map(|c| c.name().to_string()).collect(),
            );
            types.insert(
                o.clone(),
                cols.iter()
                    .map(|c| c.decl_type().map(String::from))
                    .collect(),
            );
        }
        drop(template);
        let by_guid = units
            .iter()
            .enumerate()
            .map(|(k, u)| (u.guid.clone(), k))
            .collect();
        let fed = Rc::new(Federation {
            units,
            by_guid,
            window: Cell::new(ViewWindow::default()),
            pool: RefCell::new(Vec::new()),
            defs: Arc::new(Definitions {
                bodies,
                deps,
                columns,
                types,
            }),
            progress: RefCell::new(None),
        });
        conn.create_module(MODULE, read_only_module::<FedTab>(), Some(fed.clone()))
            .at(mem)?;
        let mut sql = String::new();
        for o in &objects {
            if CROSS_PROCESS_VIEWS.contains(&o.as_str()) {
                continue;
            }
            sql.push_str(&format!(
                "CREATE VIRTUAL TABLE temp.\"{o}\" USING {MODULE};\n"
            ));
        }
        for name in CROSS_PROCESS_VIEWS {
            if let Some(body) = fed.defs.bodies.get(name) {
                sql.push_str(&format!("CREATE TEMP VIEW \"{name}\" AS {body};\n"));
            }
        }
        conn.execute_batch(&sql).at(mem)?;
        Ok(fed)
    }

    /// The processes, in input order.
    pub fn units(&self) -> &[Unit] {
        &self.units
    }

    /// Restricts every timed table (and what is built on it) to rows
    /// overlapping the window, from the next scan on.
    pub fn set_window(&self, w: ViewWindow) {
        self.window.set(w);
    }

    /// Reports the progress of every scan over all processes to `f`
    /// (`None`: stop reporting).
    pub fn set_progress(&self, f: Option<Box<ScanProgress>>) {
        *self.progress.borrow_mut() = f;
    }

    pub(crate) fn report(&self, object: &str, done: usize) {
        if let Some(f) = self.progress.borrow().as_ref() {
            f(object, done, self.units.len());
        }
    }

    /// The open database of unit `k`'s file: from the pool, or opened now
    /// (the least recently used one beyond [`POOL`] is closed once no scan
    /// uses it).
    pub fn unit_conn(&self, k: usize) -> Result<Rc<UnitConn>> {
        let unit = &self.units[k];
        let mut pool = self.pool.borrow_mut();
        if let Some(at) = pool.iter().position(|u| u.file == unit.file) {
            let u = pool.remove(at);
            pool.push(u.clone());
            return Ok(u);
        }
        let conn = open_read_only(&unit.file)?;
        // One read transaction for the connection's life: one shared lock
        // instead of one per statement (the inner loop of a join runs a
        // statement per row).
        conn.execute_batch("PRAGMA cache_size = -1024; BEGIN")
            .at(&unit.file)?;
        let u = Rc::new(UnitConn {
            file: unit.file.clone(),
            optional: RefCell::new(HashMap::new()),
            conn,
        });
        pool.push(u.clone());
        if pool.len() > POOL {
            pool.remove(0);
        }
        Ok(u)
    }

    /// Runs `f` on unit `k`'s open database, its tables named
    /// `main."<table><suffix>"`.
    pub fn with_unit<T>(&self, k: usize, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let u = self.unit_conn(k)?;
        f(&u.conn)
    }

    /// The query of `object` over unit `k`, open as `u` (see
    /// [`Definitions::unit_sql`]).
    fn unit_sql(
        &self,
        u: &UnitConn,
        k: usize,
        object: &str,
        select: &str,
        filter: &str,
    ) -> rusqlite::Result<String> {
        let sf = &self.units[k].suffix;
        Ok(self.defs.unit_sql(
            sf,
            &*u.optional(sf)?,
            &self.window.get(),
            object,
            select,
            filter,
        ))
    }

    /// The view definitions, for readers that build per-process queries
    /// on connections of their own (on other threads).
    pub fn definitions(&self) -> Arc<Definitions> {
        self.defs.clone()
    }

    /// The window applied (see [`Federation::set_window`]).
    pub fn window(&self) -> ViewWindow {
        self.window.get()
    }
}

/// The optional tables (see [`schema::OPTIONAL_TABLES`]) process `suffix`
/// has in `conn`'s `main` schema.
pub fn optional_tables(conn: &Connection, suffix: &str) -> rusqlite::Result<HashSet<&'static str>> {
    let mut optional = HashSet::new();
    for (t, _) in schema::OPTIONAL_TABLES {
        if schema::has_table(conn, "main", &format!("{t}{suffix}"))? {
            optional.insert(t);
        }
    }
    Ok(optional)
}

/// The definitions of the federated objects: each data view's SELECT over
/// unsuffixed names, what each names, and every object's columns (from
/// the first process, as [`schema::create_views`] creates them).
pub struct Definitions {
    /// Data view name → its SELECT (over unsuffixed names).
    bodies: HashMap<String, String>,
    /// Object → the objects its definition names (directly).
    deps: HashMap<String, Vec<String>>,
    /// Object → its columns.
    columns: HashMap<String, Vec<String>>,
    /// Object → its columns' declared types (a column that is an
    /// expression has none), so that the virtual table compares values
    /// with the same affinity as the view it stands for.
    types: HashMap<String, Vec<Option<String>>>,
}

impl Definitions {
    /// The objects `name` needs, dependencies first, `name` last.
    fn closure(&self, name: &str) -> Vec<String> {
        fn visit(d: &Definitions, n: &str, seen: &mut HashSet<String>, out: &mut Vec<String>) {
            if !seen.insert(n.to_string()) {
                return;
            }
            if let Some(deps) = d.deps.get(n) {
                for x in deps {
                    visit(d, x, seen, out);
                }
            }
            out.push(n.to_string());
        }
        let mut out = Vec::new();
        visit(self, name, &mut HashSet::new(), &mut out);
        out
    }

    /// The SELECT of `name` for process `sf` (tables in `main`): a table's
    /// rows (window applied), an optional table's (or none, typed, when the
    /// process lacks it, see `optional`), a data view's definition.
    fn body(
        &self,
        sf: &str,
        optional: &HashSet<&'static str>,
        w: &ViewWindow,
        name: &str,
    ) -> String {
        if let Some(b) = self.bodies.get(name) {
            return b.clone();
        }
        if let Some((t, stored)) = schema::OPTIONAL_TABLES.iter().find(|(t, _)| *t == name) {
            let cols: Vec<String> = ["id", "guid"]
                .iter()
                .chain(stored.iter())
                .map(|c| format!("\"{c}\""))
                .collect();
            return if optional.contains(t) {
                format!("SELECT {} FROM main.\"{t}{sf}\"", cols.join(", "))
            } else {
                let nulls: Vec<String> = cols.iter().map(|c| format!("NULL AS {c}")).collect();
                format!("SELECT {} WHERE 0", nulls.join(", "))
            };
        }
        format!(
            "SELECT * FROM main.\"{name}{sf}\"{}",
            schema::window_clause(name, w)
        )
    }

    /// The query of `object` (a table or data view name) over process `sf`
    /// whose tables are in `main` of the connection it runs on: the
    /// object's definition and every definition it needs as common table
    /// expressions (window `w` applied to timed tables), then `SELECT
    /// select FROM object filter`.
    pub fn unit_sql(
        &self,
        sf: &str,
        optional: &HashSet<&'static str>,
        w: &ViewWindow,
        object: &str,
        select: &str,
        filter: &str,
    ) -> String {
        let ctes: Vec<String> = self
            .closure(object)
            .iter()
            .map(|n| {
                format!(
                    "\"{n}\" AS NOT MATERIALIZED ({})",
                    self.body(sf, optional, w, n)
                )
            })
            .collect();
        format!(
            "WITH {} SELECT {select} FROM \"{object}\"{filter}",
            ctes.join(",\n")
        )
    }
}

/// The names of `known` objects that `sql` quotes (`"name"`).
fn quoted_names(sql: &str, known: &HashSet<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = sql;
    while let Some(a) = rest.find('"') {
        let after = &rest[a + 1..];
        let Some(b) = after.find('"') else { break };
        let name = &after[..b];
        if known.contains(name) && !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
        rest = &after[b + 1..];
    }
    out
}

/// A running query on a unit's database, with the statement and the rows
/// kept alive beside the connection they borrow.
struct Scan {
    /// Dropped first: borrows `stmt`.
    rows: Option<Rows<'static>>,
    /// Boxed so its address never changes; freed in `drop`.
    stmt: *mut Statement<'static>,
    /// The unit it reads.
    k: usize,
    /// Dropped last: `stmt` borrows its connection.
    _unit: Rc<UnitConn>,
}

impl Scan {
    fn new(unit: Rc<UnitConn>, k: usize, sql: &str) -> rusqlite::Result<Scan> {
        let stmt = unit.conn.prepare(sql)?;
        // SAFETY: the statement borrows `unit.conn`, which lives in an `Rc`
        // allocation that this Scan keeps alive (field `_unit`, dropped after
        // the statement) and never moves; extending the borrow to 'static
        // is sound because the statement is freed in `drop` before `unit`.
        let stmt: Statement<'static> = unsafe { std::mem::transmute(stmt) };
        Ok(Scan {
            rows: None,
            stmt: Box::into_raw(Box::new(stmt)),
            k,
            _unit: unit,
        })
    }

    /// (Re)runs the statement with `params` and moves to its first row;
    /// returns whether there is one.
    fn start(&mut self, params: &[Value]) -> rusqlite::Result<bool> {
        self.rows = None;
        // SAFETY: `stmt` came from Box::into_raw in `new` and is freed only
        // in `drop`; no Rows borrows it any more (cleared just above).
        let st = unsafe { &mut *self.stmt };
        st.clear_bindings();
        for (i, v) in params.iter().enumerate() {
            st.raw_bind_parameter(i + 1, v)?;
        }
        let rows: Rows<'_> = st.raw_query();
        // SAFETY: the rows borrow the boxed statement, which stays at its
        // address until `drop`, where the rows are dropped first.
        self.rows = Some(unsafe { std::mem::transmute::<Rows<'_>, Rows<'static>>(rows) });
        self.advance()
    }

    /// Moves to the next row; returns whether there is one.
    fn advance(&mut self) -> rusqlite::Result<bool> {
        use rusqlite::fallible_streaming_iterator::FallibleStreamingIterator;
        match self.rows.as_mut() {
            Some(r) => {
                r.advance()?;
                Ok(r.get().is_some())
            }
            None => Ok(false),
        }
    }

    fn row(&self) -> Option<&Row<'static>> {
        use rusqlite::fallible_streaming_iterator::FallibleStreamingIterator;
        self.rows.as_ref().and_then(|r| r.get())
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        self.rows = None;
        // SAFETY: the rows (the only borrower) are gone; the pointer came
        // from Box::into_raw in `new` and is freed only here, before `_unit`.
        drop(unsafe { Box::from_raw(self.stmt) });
    }
}

/// A federated object: a virtual table over one view of every process.
#[repr(C)]
struct FedTab {
    /// Base class; must come first.
    base: sqlite3_vtab,
    fed: Rc<Federation>,
    object: String,
    columns: Vec<String>,
    guid_col: Option<c_int>,
    id_col: Option<c_int>,
    rows_per_unit: f64,
}

/// Constraint operators pushed down to the per-process query.
fn op_sql(op: &IndexConstraintOp) -> Option<&'static str> {
    Some(match op {
        IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_EQ => "=",
        IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_GT => ">",
        IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_LE => "<=",
        IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_LT => "<",
        IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_GE => ">=",
        _ => return None,
    })
}

fn module_error(e: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::ModuleError(e.to_string())
}

// SAFETY: FedTab is #[repr(C)] with the sqlite3_vtab base first, as the
// trait requires.
unsafe impl<'vtab> VTab<'vtab> for FedTab {
    type Aux = Rc<Federation>;
    type Cursor = FedCursor<'vtab>;

    fn connect(
        _db: &mut VTabConnection,
        aux: Option<&Rc<Federation>>,
        args: &[&[u8]],
    ) -> rusqlite::Result<(String, FedTab)> {
        let fed = aux
            .ok_or_else(|| module_error("strobe_fed: no federation"))?
            .clone();
        let object = args
            .get(2)
            .map(|a| rusqlite::vtab::dequote(&String::from_utf8_lossy(a)).to_string())
            .ok_or_else(|| module_error("strobe_fed: no table name"))?;
        let columns = fed
            .defs
            .columns
            .get(&object)
            .cloned()
            .ok_or_else(|| module_error(format!("strobe_fed: unknown object {object}")))?;
        let types = fed.defs.types.get(&object).cloned().unwrap_or_default();
        let decl = format!(
            "CREATE TABLE x({})",
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let ty = types
                        .get(i)
                        .cloned()
                        .flatten()
                        .filter(|t| t.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == ' '))
                        .map(|t| format!(" {t}"))
                        .unwrap_or_default();
                    format!("\"{}\"{ty}", c.replace('"', "\"\""))
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        let pos = |n: &str| columns.iter().position(|c| c == n).map(|i| i as c_int);
        let tab = FedTab {
            base: sqlite3_vtab::default(),
            guid_col: pos("guid"),
            id_col: pos("id"),
            rows_per_unit: if SMALL.contains(&object.as_str()) {
                10.0
            } else {
                2_000.0
            },
            fed,
            object,
            columns,
        };
        Ok((decl, tab))
    }

    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<()> {
        let mut plan = Vec::new();
        let (mut guid_eq, mut id_eq, mut narrowed) = (false, false, 0u32);
        let mut argv = 0;
        // Only comparisons in the default collation are pushed down: the
        // per-process query compares natively, in BINARY.
        let binary: Vec<bool> = (0..info.constraints().count())
            .map(|i| {
                info.collation(i)
                    .is_ok_and(|c| c.eq_ignore_ascii_case("BINARY"))
            })
            .collect();
        for (i, (c, mut u)) in info.constraints_and_usages().enumerate() {
            if !c.is_usable() || c.column() < 0 || !binary[i] {
                continue;
            }
            let Some(op) = op_sql(&c.operator()) else {
                continue;
            };
            argv += 1;
            u.set_argv_index(argv);
            if Some(c.column()) == self.guid_col && op == "=" {
                // The unit is chosen by guid: every row of it matches.
                u.set_omit(true);
                guid_eq = true;
                plan.push(format!("{}g", c.column()));
            } else {
                id_eq |= Some(c.column()) == self.id_col && op == "=";
                narrowed += 1;
                plan.push(format!("{}{op}", c.column()));
            }
        }
        let used = info.col_used();
        info.set_idx_str(&format!("{used:x};{}", plan.join(",")));
        let units = if guid_eq {
            1.0
        } else {
            self.fed.units.len() as f64
        };
        let (rows, scanned) = if id_eq {
            (1.0, 1.0)
        } else if narrowed > 0 {
            (self.rows_per_unit / 10.0, self.rows_per_unit)
        } else {
            (self.rows_per_unit, self.rows_per_unit)
        };
        // Opening a process's database costs about what scanning a few
        // hundred rows does.
        let open = if guid_eq { 1.0 } else { 200.0 };
        info.set_estimated_cost(units * (open + scanned));
        info.set_estimated_rows((units * rows).max(1.0) as i64);
        Ok(())
    }

    fn open(&'vtab mut self) -> rusqlite::Result<FedCursor<'vtab>> {
        Ok(FedCursor {
            base: sqlite3_vtab_cursor::default(),
            tab: self,
            plan: String::new(),
            select: String::new(),
            filter: String::new(),
            col_map: Vec::new(),
            params: Vec::new(),
            units: Vec::new(),
            next_unit: 0,
            full: false,
            scan: None,
            has_row: false,
            rowid: 0,
        })
    }
}

impl CreateVTab<'_> for FedTab {
    const KIND: VTabKind = VTabKind::Default;
}

/// A scan of one federated object over the units its constraints allow.
#[repr(C)]
struct FedCursor<'vtab> {
    /// Base class; must come first.
    base: sqlite3_vtab_cursor,
    tab: &'vtab FedTab,
    /// The plan the statement was built for (`idx_str`).
    plan: String,
    select: String,
    filter: String,
    /// Virtual table column → column of the per-unit statement.
    col_map: Vec<Option<usize>>,
    params: Vec<Value>,
    units: Vec<usize>,
    next_unit: usize,
    /// A scan over every unit (reported as progress).
    full: bool,
    scan: Option<Scan>,
    has_row: bool,
    rowid: i64,
}

impl FedCursor<'_> {
    /// Builds the per-unit SELECT list and WHERE of `plan` with its
    /// values; returns the units the guid constraints allow (all of them
    /// without one).
    fn prepare_plan(&mut self, plan: &str, args: &Filters<'_>) -> rusqlite::Result<Vec<usize>> {
        let (used, cons) = plan.split_once(';').unwrap_or((plan, ""));
        let used = u64::from_str_radix(used, 16).unwrap_or(u64::MAX);
        let n = self.tab.columns.len();
        let mut cols = Vec::new();
        self.col_map = vec![None; n];
        for (i, name) in self.tab.columns.iter().enumerate() {
            let bit = if i >= 63 { 1u64 << 63 } else { 1u64 << i };
            if used & bit != 0 {
                self.col_map[i] = Some(cols.len());
                cols.push(format!("\"{}\"", name.replace('"', "\"\"")));
            }
        }
        self.select = if cols.is_empty() {
            "1".to_string()
        } else {
            cols.join(", ")
        };
        let mut wh = Vec::new();
        self.params.clear();
        let mut guid: Option<String> = None;
        let mut conflicting = false;
        for (k, c) in cons.split(',').filter(|c| !c.is_empty()).enumerate() {
            let digits = c.bytes().take_while(u8::is_ascii_digit).count();
            let col: usize = c[..digits].parse().map_err(module_error)?;
            let op = &c[digits..];
            let v: Value = args.get(k)?;
            if op == "g" {
                let g = match &v {
                    Value::Text(t) => t.clone(),
                    _ => {
                        conflicting = true;
                        continue;
                    }
                };
                if guid.as_ref().is_some_and(|x| *x != g) {
                    conflicting = true;
                }
                guid = Some(g);
                continue;
            }
            let name = self
                .tab
                .columns
                .get(col)
                .ok_or_else(|| module_error("strobe_fed: bad plan"))?;
            self.params.push(v);
            wh.push(format!(
                "\"{}\" {op} ?{}",
                name.replace('"', "\"\""),
                self.params.len()
            ));
        }
        self.filter = if wh.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", wh.join(" AND "))
        };
        let fed = &self.tab.fed;
        self.full = guid.is_none() && !conflicting;
        Ok(match guid {
            _ if conflicting => Vec::new(),
            Some(g) => fed.by_guid.get(&g).map(|k| vec![*k]).unwrap_or_default(),
            None => (0..fed.units.len()).collect(),
        })
    }

    /// Moves to the next unit that has a row; `has_row` false at the end.
    fn next_unit_with_rows(&mut self) -> rusqlite::Result<()> {
        self.has_row = false;
        while self.next_unit < self.units.len() {
            let k = self.units[self.next_unit];
            self.next_unit += 1;
            let fed = &self.tab.fed;
            if self.full {
                fed.report(&self.tab.object, self.next_unit - 1);
            }
            // A statement of the same plan on the same unit is run again
            // with the new values (the inner loop of a join looks rows up
            // by guid and id again and again).
            let reuse = self.scan.as_ref().is_some_and(|s| s.k == k);
            if !reuse {
                self.scan = None;
                let u = fed.unit_conn(k).map_err(module_error)?;
                let sql = fed
                    .unit_sql(&u, k, &self.tab.object, &self.select, &self.filter)
                    .map_err(|e| module_error(format!("{}: {e}", fed.units[k].file.display())))?;
                let scan = Scan::new(u, k, &sql)
                    .map_err(|e| module_error(format!("{}: {e}", fed.units[k].file.display())))?;
                self.scan = Some(scan);
            }
            let scan = self.scan.as_mut().expect("set above");
            let found = scan
                .start(&self.params)
                .map_err(|e| module_error(format!("{}: {e}", fed.units[k].file.display())))?;
            if found {
                self.has_row = true;
                return Ok(());
            }
        }
        if self.full {
            self.tab.fed.report(&self.tab.object, self.units.len());
        }
        Ok(())
    }
}

// SAFETY: FedCursor is #[repr(C)] with the sqlite3_vtab_cursor base first,
// as the trait requires.
unsafe impl VTabCursor for FedCursor<'_> {
    fn filter(
        &mut self,
        _idx_num: c_int,
        idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<()> {
        let plan = idx_str.unwrap_or("").to_string();
        if plan != self.plan {
            // A new plan: new statements.
            self.scan = None;
        }
        self.units = self.prepare_plan(&plan, args)?;
        self.plan = plan;
        self.next_unit = 0;
        self.next_unit_with_rows()
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.rowid += 1;
        let advanced = match self.scan.as_mut() {
            Some(s) => s.advance()?,
            None => false,
        };
        if advanced {
            return Ok(());
        }
        self.next_unit_with_rows()
    }

    fn eof(&self) -> bool {
        !self.has_row
    }

    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        let Some(Some(at)) = self.col_map.get(i as usize) else {
            return ctx.set_result(&Value::Null);
        };
        match self.scan.as_ref().and_then(|s| s.row()) {
            Some(r) => ctx.set_result(&ToSqlOutput::Borrowed(r.get_ref(*at)?)),
            None => ctx.set_result(&Value::Null),
        }
    }

    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(self.rowid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_process_views_are_data_views() {
        for v in CROSS_PROCESS_VIEWS {
            assert!(schema::DATA_VIEW_NAMES.contains(&v), "{v}");
        }
    }

    #[test]
    fn quoted_names_finds_known_objects_once() {
        let known: HashSet<&str> = ["a", "b"].into_iter().collect();
        let got = quoted_names(r#"SELECT "x" FROM "a" JOIN "b" ON "a".id = "b".id"#, &known);
        assert_eq!(got, ["a", "b"]);
    }

    #[test]
    fn the_window_restricts_timed_tables_only() {
        let w = ViewWindow {
            start: Some(5),
            end: Some(9),
        };
        assert_eq!(
            schema::window_clause("rocpd_region", &w),
            " WHERE \"end\" >= 5 AND \"start\" <= 9"
        );
        assert_eq!(schema::window_clause("rocpd_string", &w), "");
    }
}
