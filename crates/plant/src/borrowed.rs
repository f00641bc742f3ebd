//! Typing a piece of the plant file without copying it first.
//!
//! `toml::Value` deserializes only by value, and a piece is kept to find an error's key path
//! again (`serde_msg`): typing each action of a hall that way copied every action's tree once,
//! the largest share of the loader's allocations. [`Borrowed`] reads the same tree through a
//! reference and makes the same calls on serde's visitors as `toml::Value` does, so a piece it
//! types is typed the same. Anything it cannot mirror exactly (a date-time, an enum written as
//! a table) it refuses, and so does any mistake in the file: the caller then types the piece
//! the usual way, which gives toml's own error to word.

use serde::de::value::{Error, MapDeserializer, SeqDeserializer};
use serde::de::{self, IntoDeserializer, Visitor};
use toml::Value;

/// A TOML value read through a reference.
#[derive(Clone, Copy)]
pub(crate) struct Borrowed<'a>(pub &'a Value);

/// Types `value` as `T` through a reference, or `None` where the owned path must decide.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(value: &Value) -> Option<T> {
    T::deserialize(Borrowed(value)).ok()
}

impl<'de> IntoDeserializer<'de, Error> for Borrowed<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> de::Deserializer<'de> for Borrowed<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Boolean(v) => visitor.visit_bool(*v),
            Value::Integer(n) => visitor.visit_i64(*n),
            Value::Float(n) => visitor.visit_f64(*n),
            Value::String(s) => visitor.visit_str(s),
            Value::Datetime(_) => Err(de::Error::custom("a date-time is typed by toml")),
            Value::Array(items) => {
                let mut seq = SeqDeserializer::new(items.iter().map(Borrowed));
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Value::Table(t) => {
                let entries = t.iter().map(|(k, v)| (k.as_str(), Borrowed(v)));
                let mut map = MapDeserializer::new(entries);
                let out = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(out)
            }
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(variant) => visitor.visit_enum(variant.as_str().into_deserializer()),
            _ => Err(de::Error::custom(
                "an enum not written as a string is typed by toml",
            )),
        }
    }

    // As toml: a key that is present is `Some`; `None` is a key left out.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool u8 u16 u32 u64 i8 i16 i32 i64 f32 f64 char str string unit seq
        bytes byte_buf map unit_struct tuple_struct struct
        tuple ignored_any identifier
    }
}

#[cfg(test)]
mod tests;
