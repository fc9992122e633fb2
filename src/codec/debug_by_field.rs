//! [`debug_by_field!`]: `Debug` for a type that holds connections, threads or locks,
//! shown by the one value that tells it apart.

/// Implements `Debug` for `$type` as `$type { $name: value, .. }`, the rest left out.
///
/// * `debug_by_field!(Type, field)` shows `self.field`.
/// * `debug_by_field!(Type, name = path)` shows `self.path` under `name`, where `path`
///   is a field or a chain of fields and method calls on `self` (what it shows must not
///   be a secret: never a whole configuration that may hold a password).
///
/// ```ignore
/// debug_by_field!(Client, hostname);
/// debug_by_field!(HttpServer, addr = acceptor.local_addr());
/// ```
macro_rules! debug_by_field {
    ($type:ident, $field:ident) => {
        $crate::codec::debug_by_field::debug_by_field!($type, $field = $field);
    };
    ($type:ident, $name:ident = $($path:tt)+) => {
        impl std::fmt::Debug for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($type))
                    .field(stringify!($name), &self.$($path)+)
                    .finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use debug_by_field;

#[cfg(test)]
mod tests {
    struct Named {
        name: String,
        secret: String,
    }

    debug_by_field!(Named, name);

    struct Counted {
        items: Vec<u8>,
    }

    debug_by_field!(Counted, len = items.len());

    #[test]
    fn shows_one_value_and_elides_the_rest() {
        let n = Named {
            name: "a".into(),
            secret: "hunter2".into(),
        };
        assert_eq!(format!("{n:?}"), "Named { name: \"a\", .. }");
        assert!(!format!("{n:?}").contains(&n.secret));
        let c = Counted { items: vec![1, 2] };
        assert_eq!(format!("{c:?}"), "Counted { len: 2, .. }");
    }
}
