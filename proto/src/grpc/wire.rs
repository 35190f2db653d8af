//! Conversions between this crate's types and their messages, one field
//! at a time: [`ToWire`] and [`FromWire`] for each field's type, and the
//! `wire!` macro for a struct whose message has the same field names (its
//! conversion is the list of its fields).

use super::ConvError;

/// A value as its message field carries it.
pub trait ToWire<T> {
    fn to_wire(self) -> T;
}

/// A value from its message field, or why the field is wrong.
pub trait FromWire<T>: Sized {
    fn from_wire(w: T) -> Result<Self, ConvError>;
}

/// `e` said of `field`, unless it already names a field.
pub(crate) fn at(mut e: ConvError, field: &'static str) -> ConvError {
    if e.field.is_empty() {
        e.field = field;
    }
    e
}

pub(crate) fn bad(why: String) -> ConvError {
    ConvError { field: "", why }
}

macro_rules! same {
    ($($t:ty),*) => {$(
        impl ToWire<$t> for $t {
            fn to_wire(self) -> $t {
                self
            }
        }
        impl FromWire<$t> for $t {
            fn from_wire(w: $t) -> Result<$t, ConvError> {
                Ok(w)
            }
        }
    )*};
}

same!(u32, u64, i32, i64, bool, f64, String);

impl<A: ToWire<B>, B> ToWire<Option<B>> for Option<A> {
    fn to_wire(self) -> Option<B> {
        self.map(ToWire::to_wire)
    }
}

impl<A: FromWire<B>, B> FromWire<Option<B>> for Option<A> {
    fn from_wire(w: Option<B>) -> Result<Self, ConvError> {
        w.map(A::from_wire).transpose()
    }
}

impl<A: ToWire<B>, B> ToWire<Vec<B>> for Vec<A> {
    fn to_wire(self) -> Vec<B> {
        self.into_iter().map(ToWire::to_wire).collect()
    }
}

impl<A: FromWire<B>, B> FromWire<Vec<B>> for Vec<A> {
    fn from_wire(w: Vec<B>) -> Result<Self, ConvError> {
        w.into_iter().map(A::from_wire).collect()
    }
}

/// Both conversions of a struct and its message, field by field (the
/// fields have the same names); `nested` also for the struct as a message
/// field of another (absent: the default).
macro_rules! wire {
    ($a:ident <=> $b:ident { $($f:ident),* $(,)? }) => {
        impl $crate::grpc::wire::ToWire<$crate::grpc::pb::$b> for $a {
            fn to_wire(self) -> $crate::grpc::pb::$b {
                $crate::grpc::pb::$b { $($f: $crate::grpc::wire::ToWire::to_wire(self.$f),)* }
            }
        }
        impl $crate::grpc::wire::FromWire<$crate::grpc::pb::$b> for $a {
            #[allow(clippy::needless_update)]
            fn from_wire(w: $crate::grpc::pb::$b) -> Result<$a, $crate::grpc::ConvError> {
                Ok($a {
                    $($f: $crate::grpc::wire::FromWire::from_wire(w.$f).map_err(|e| $crate::grpc::wire::at(e, stringify!($f)))?,)*
                    ..Default::default()
                })
            }
        }
    };
    (nested $a:ident <=> $b:ident { $($f:ident),* $(,)? }) => {
        wire!($a <=> $b { $($f),* });
        impl $crate::grpc::wire::ToWire<Option<$crate::grpc::pb::$b>> for $a {
            fn to_wire(self) -> Option<$crate::grpc::pb::$b> {
                Some($crate::grpc::wire::ToWire::to_wire(self))
            }
        }
        impl $crate::grpc::wire::FromWire<Option<$crate::grpc::pb::$b>> for $a {
            fn from_wire(w: Option<$crate::grpc::pb::$b>) -> Result<$a, $crate::grpc::ConvError> {
                w.map(<$a as $crate::grpc::wire::FromWire<$crate::grpc::pb::$b>>::from_wire).transpose().map(Option::unwrap_or_default)
            }
        }
    };
}
