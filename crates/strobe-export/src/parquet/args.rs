//! A region's arguments as the dataset's columns.
//!
//! Owns [`MpiArgs`] (the arguments of the MPI contract that get typed
//! columns) and [`args_json`] (all of a region's arguments as one JSON
//! object, values typed as their types say). It never reads a profile.

use strobe_db::process_tables::RegionArg;

use crate::jsonw;

/// The arguments of the MPI contract that get typed columns.
#[derive(Default)]
pub(super) struct MpiArgs {
    pub(super) bytes: Option<i64>,
    pub(super) recv_bytes: Option<i64>,
    pub(super) peer: Option<i64>,
    pub(super) tag: Option<i64>,
    pub(super) root: Option<i64>,
    pub(super) comm: Option<String>,
    pub(super) comm_size: Option<i64>,
}

impl MpiArgs {
    pub(super) fn take(&mut self, name: &str, value: &str) {
        let int = || value.trim().parse::<i64>().ok();
        match name {
            "bytes" => self.bytes = int(),
            "recv_bytes" => self.recv_bytes = int(),
            "peer" => self.peer = int(),
            "tag" => self.tag = int(),
            "root" => self.root = int(),
            "comm" => self.comm = Some(value.to_string()),
            "comm_size" => self.comm_size = int(),
            _ => {}
        }
    }
}

/// An argument's value as JSON, as its type says: integers (`int`,
/// `int64`, `uint64`, …, any that parses as a 64-bit integer), floats,
/// booleans; anything else, and a value its type does not parse, a
/// string.
pub(super) fn json_value(out: &mut Vec<u8>, ty: &str, value: &str) {
    match ty {
        "int" | "int64" | "uint64" | "int32" | "uint32" | "long" | "u64" | "i64" => {
            let v = value.trim();
            if let Ok(i) = v.parse::<i64>() {
                return jsonw::int(out, i);
            }
            if let Ok(u) = v.parse::<u64>() {
                return out.extend_from_slice(itoa::Buffer::new().format(u).as_bytes());
            }
        }
        "float" | "double" => {
            if let Ok(f) = value.trim().parse::<f64>() {
                if f.is_finite() {
                    return jsonw::float(out, f);
                }
            }
        }
        "bool" => {
            if let Ok(b) = value.trim().parse::<bool>() {
                return out.extend_from_slice(if b { b"true" } else { b"false" });
            }
        }
        _ => {}
    }
    jsonw::string(out, value)
}

/// The arguments as one JSON object (of equal names, the last kept).
pub(super) fn args_json(out: &mut Vec<u8>, args: &[RegionArg]) {
    out.clear();
    out.push(b'{');
    let mut first = true;
    for (i, a) in args.iter().enumerate() {
        if args[i + 1..].iter().any(|b| b.name == a.name) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        jsonw::string(out, &a.name);
        out.push(b':');
        json_value(out, &a.ty, &a.value);
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_become_typed_json() {
        let a = |n: &str, t: &str, v: &str| RegionArg {
            position: 0,
            name: n.to_string(),
            ty: t.to_string(),
            value: v.to_string(),
        };
        let mut out = Vec::new();
        args_json(
            &mut out,
            &[
                a("bytes", "int", "8192"),
                a("comm", "string", "world.3"),
                a("flow_out", "int", "18446744073709551615"),
                a("ratio", "double", "0.5"),
                a("bad", "int", "12x"),
                a("ok", "bool", "true"),
                a("bytes", "int", "16"),
                a("q", "string", "say \"hi\"\n"),
            ],
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["bytes"], 16);
        assert_eq!(v["comm"], "world.3");
        assert_eq!(v["flow_out"].as_u64(), Some(u64::MAX));
        assert_eq!(v["ratio"], 0.5);
        assert_eq!(v["bad"], "12x");
        assert_eq!(v["ok"], true);
        assert_eq!(v["q"], "say \"hi\"\n");
        assert_eq!(v.as_object().unwrap().len(), 7);
    }

    #[test]
    fn mpi_arguments_fill_their_columns() {
        let mut m = MpiArgs::default();
        for (n, v) in [
            ("bytes", "4096"),
            ("peer", "3"),
            ("tag", "-1"),
            ("comm", "world"),
            ("comm_size", " 4 "),
            ("root", "zero"),
        ] {
            m.take(n, v);
        }
        assert_eq!(
            (
                m.bytes,
                m.peer,
                m.tag,
                m.comm.as_deref(),
                m.comm_size,
                m.root
            ),
            (Some(4096), Some(3), Some(-1), Some("world"), Some(4), None)
        );
        assert_eq!(m.recv_bytes, None);
    }
}
