//! The messages of Optuna's storage service (`optuna.StorageService`, Optuna 4.2 and later: the contract its
//! gRPC storage proxy serves), written out by field number. Attribute values travel as JSON text; a
//! parameter as its internal number (a choice's index) beside its distribution's JSON; times as
//! `%Y-%m-%d %H:%M:%S%.6f` (empty when unset). Enums are sent as their numbers.

use std::collections::HashMap;

/// `optuna.StudyDirection.MAXIMIZE`.
pub(crate) const MAXIMIZE: i32 = 1;

/// `optuna.TrialState`.
pub(crate) mod state {
    pub(crate) const RUNNING: i32 = 0;
    pub(crate) const COMPLETE: i32 = 1;
    pub(crate) const PRUNED: i32 = 2;
    pub(crate) const FAIL: i32 = 3;
}

/// The service's methods, as gRPC paths.
pub(crate) mod method {
    pub(crate) const CREATE_NEW_STUDY: &str = "/optuna.StorageService/CreateNewStudy";
    pub(crate) const SET_STUDY_SYSTEM_ATTRIBUTE: &str = "/optuna.StorageService/SetStudySystemAttribute";
    pub(crate) const GET_STUDY_ID_FROM_NAME: &str = "/optuna.StorageService/GetStudyIdFromName";
    pub(crate) const GET_STUDY_DIRECTIONS: &str = "/optuna.StorageService/GetStudyDirections";
    pub(crate) const GET_STUDY_SYSTEM_ATTRIBUTES: &str = "/optuna.StorageService/GetStudySystemAttributes";
    pub(crate) const GET_ALL_STUDIES: &str = "/optuna.StorageService/GetAllStudies";
    pub(crate) const CREATE_NEW_TRIAL: &str = "/optuna.StorageService/CreateNewTrial";
    pub(crate) const SET_TRIAL_PARAMETER: &str = "/optuna.StorageService/SetTrialParameter";
    pub(crate) const SET_TRIAL_STATE_VALUES: &str = "/optuna.StorageService/SetTrialStateValues";
    pub(crate) const SET_TRIAL_INTERMEDIATE_VALUE: &str = "/optuna.StorageService/SetTrialIntermediateValue";
    pub(crate) const SET_TRIAL_USER_ATTRIBUTE: &str = "/optuna.StorageService/SetTrialUserAttribute";
    pub(crate) const SET_TRIAL_SYSTEM_ATTRIBUTE: &str = "/optuna.StorageService/SetTrialSystemAttribute";
    pub(crate) const GET_TRIAL: &str = "/optuna.StorageService/GetTrial";
    pub(crate) const GET_TRIALS: &str = "/optuna.StorageService/GetTrials";
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Empty {}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CreateNewStudyRequest {
    #[prost(int32, repeated, tag = "1")]
    pub directions: Vec<i32>,
    #[prost(string, tag = "2")]
    pub study_name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StudyIdReply {
    #[prost(int64, tag = "1")]
    pub study_id: i64,
}

/// `GetStudyDirectionsRequest`, `GetStudySystemAttributesRequest`: the study's id alone.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StudyIdRequest {
    #[prost(int64, tag = "1")]
    pub study_id: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StudyNameRequest {
    #[prost(string, tag = "1")]
    pub study_name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DirectionsReply {
    #[prost(int32, repeated, tag = "1")]
    pub directions: Vec<i32>,
}

/// `SetStudySystemAttributeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StudyAttributeRequest {
    #[prost(int64, tag = "1")]
    pub study_id: i64,
    #[prost(string, tag = "2")]
    pub key: String,
    #[prost(string, tag = "3")]
    pub value: String,
}

/// `GetStudySystemAttributesReply`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AttributesReply {
    #[prost(map = "string, string", tag = "1")]
    pub attributes: HashMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Study {
    #[prost(int64, tag = "1")]
    pub study_id: i64,
    #[prost(string, tag = "2")]
    pub study_name: String,
    #[prost(int32, repeated, tag = "3")]
    pub directions: Vec<i32>,
    #[prost(map = "string, string", tag = "4")]
    pub user_attributes: HashMap<String, String>,
    #[prost(map = "string, string", tag = "5")]
    pub system_attributes: HashMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AllStudiesReply {
    #[prost(message, repeated, tag = "1")]
    pub studies: Vec<Study>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Trial {
    #[prost(int64, tag = "1")]
    pub trial_id: i64,
    #[prost(int64, tag = "2")]
    pub number: i64,
    #[prost(int32, tag = "3")]
    pub state: i32,
    #[prost(double, repeated, tag = "4")]
    pub values: Vec<f64>,
    #[prost(string, tag = "5")]
    pub datetime_start: String,
    #[prost(string, tag = "6")]
    pub datetime_complete: String,
    #[prost(map = "string, double", tag = "7")]
    pub params: HashMap<String, f64>,
    #[prost(map = "string, string", tag = "8")]
    pub distributions: HashMap<String, String>,
    #[prost(map = "string, string", tag = "9")]
    pub user_attributes: HashMap<String, String>,
    #[prost(map = "string, string", tag = "10")]
    pub system_attributes: HashMap<String, String>,
    #[prost(map = "int64, double", tag = "11")]
    pub intermediate_values: HashMap<i64, f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CreateNewTrialRequest {
    #[prost(int64, tag = "1")]
    pub study_id: i64,
    #[prost(message, optional, tag = "2")]
    pub template_trial: Option<Trial>,
    #[prost(bool, tag = "3")]
    pub template_trial_is_none: bool,
}

/// `CreateNewTrialReply`, `GetTrialIdFromStudyIdTrialNumberReply`, `GetTrialRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TrialIdMessage {
    #[prost(int64, tag = "1")]
    pub trial_id: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SetTrialParameterRequest {
    #[prost(int64, tag = "1")]
    pub trial_id: i64,
    #[prost(string, tag = "2")]
    pub param_name: String,
    #[prost(double, tag = "3")]
    pub param_value_internal: f64,
    #[prost(string, tag = "4")]
    pub distribution: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SetTrialStateValuesRequest {
    #[prost(int64, tag = "1")]
    pub trial_id: i64,
    #[prost(int32, tag = "2")]
    pub state: i32,
    #[prost(double, repeated, tag = "3")]
    pub values: Vec<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SetTrialStateValuesReply {
    #[prost(bool, tag = "1")]
    pub trial_updated: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SetTrialIntermediateValueRequest {
    #[prost(int64, tag = "1")]
    pub trial_id: i64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(double, tag = "3")]
    pub intermediate_value: f64,
}

/// `SetTrialUserAttributeRequest`, `SetTrialSystemAttributeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TrialAttributeRequest {
    #[prost(int64, tag = "1")]
    pub trial_id: i64,
    #[prost(string, tag = "2")]
    pub key: String,
    #[prost(string, tag = "3")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TrialReply {
    #[prost(message, optional, tag = "1")]
    pub trial: Option<Trial>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct GetTrialsRequest {
    #[prost(int64, tag = "1")]
    pub study_id: i64,
    #[prost(int64, repeated, tag = "2")]
    pub included_trial_ids: Vec<i64>,
    #[prost(int64, tag = "3")]
    pub trial_id_greater_than: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TrialsReply {
    #[prost(message, repeated, tag = "1")]
    pub trials: Vec<Trial>,
}
