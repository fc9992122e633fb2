//! [`code_enum!`]: a field-less enum whose variants are integer codes on the wire, with
//! the one lookup from a code back to its variant.

/// Declares a `#[repr(int)]` enum whose variants carry explicit codes, and gives it
/// `from_code` (the variant a code names, `None` for any other code), `code` (the
/// variant's value) and `ALL` (every variant, in declaration order). Every variant names its code and ends with a comma; attributes
/// and doc comments on the enum and its variants (`#[default]` too) pass through
/// unchanged.
///
/// ```ignore
/// code_enum! {
///     /// What a frame carries.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Kind: u8 {
///         /// A request.
///         Request = 1,
///         /// A reply.
///         Reply = 2,
///     }
/// }
/// ```
macro_rules! code_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident: $repr:ident {
            $($(#[$variant_meta:meta])* $variant:ident = $value:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[repr($repr)]
        $vis enum $name {
            $($(#[$variant_meta])* $variant = $value,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            $vis const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The variant whose code is `code`, or `None` when no variant has it.
            $vis const fn from_code(code: $repr) -> Option<$name> {
                match code {
                    $($value => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// This variant's code on the wire.
            $vis const fn code(self) -> $repr {
                self as $repr
            }
        }
    };
}

pub(crate) use code_enum;

#[cfg(test)]
mod tests {
    code_enum! {
        /// A test enum with a gap, a negative code and a default.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        enum Sample: i32 {
            /// Below zero.
            Negative = -1,
            /// The first.
            #[default]
            One = 1,
            /// After a gap.
            Five = 5,
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for &v in Sample::ALL {
            assert_eq!(Sample::from_code(v.code()), Some(v));
        }
        assert_eq!(Sample::Five.code(), 5);
        assert_eq!(Sample::default(), Sample::One);
        for code in [-2, 0, 2, 4, 6] {
            assert_eq!(Sample::from_code(code), None);
        }
    }
}
