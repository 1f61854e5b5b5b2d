pub mod fake_api;
