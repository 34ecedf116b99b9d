package fakepubsub

import (
	"fmt"
	"time"
)

// Topic names the tests use.
const (
	LoginTopic   = "/event/LoginEventStream"
	AccountTopic = "/data/AccountChangeEvent"
)

// LoginEventStreamSchema is shaped like Salesforce's LoginEventStream
// schema: datetimes are longs (epoch milliseconds), most fields nullable.
const LoginEventStreamSchema = `{"type":"record","name":"LoginEventStream","namespace":"com.sforce.eventbus","fields":[
 {"name":"EventDate","type":"long","doc":"EventDate:DateTime"},
 {"name":"CreatedDate","type":"long","doc":"CreatedDate:DateTime"},
 {"name":"CreatedById","type":"string"},
 {"name":"EventIdentifier","type":["null","string"],"default":null},
 {"name":"EventUuid","type":["null","string"],"default":null},
 {"name":"Username","type":["null","string"],"default":null},
 {"name":"UserId","type":["null","string"],"default":null},
 {"name":"SourceIp","type":["null","string"],"default":null},
 {"name":"Status","type":["null","string"],"default":null},
 {"name":"LoginType","type":["null","string"],"default":null},
 {"name":"Browser","type":["null","string"],"default":null},
 {"name":"AdditionalInfo","type":["null","string"],"default":null}
]}`

// AccountChangeEventSchema is shaped like a Change Data Capture schema: a
// ChangeEventHeader record, nullable body fields, a compound address.
const AccountChangeEventSchema = `{"type":"record","name":"AccountChangeEvent","namespace":"com.sforce.eventbus","fields":[
 {"name":"ChangeEventHeader","type":{"type":"record","name":"ChangeEventHeader","fields":[
   {"name":"entityName","type":"string"},
   {"name":"recordIds","type":{"type":"array","items":"string"}},
   {"name":"changeType","type":{"type":"enum","name":"ChangeType","symbols":["CREATE","UPDATE","DELETE","UNDELETE","GAP_CREATE","GAP_UPDATE","GAP_DELETE","GAP_UNDELETE","GAP_OVERFLOW"]}},
   {"name":"changeOrigin","type":"string"},
   {"name":"transactionKey","type":"string"},
   {"name":"sequenceNumber","type":"int"},
   {"name":"commitTimestamp","type":"long"},
   {"name":"commitNumber","type":"long"},
   {"name":"commitUser","type":"string"},
   {"name":"nulledFields","type":{"type":"array","items":"string"}},
   {"name":"diffFields","type":{"type":"array","items":"string"}},
   {"name":"changedFields","type":{"type":"array","items":"string"}}]}},
 {"name":"Name","type":["null","string"],"default":null},
 {"name":"BillingAddress","type":["null",{"type":"record","name":"Address","fields":[
   {"name":"Street","type":["null","string"],"default":null},
   {"name":"City","type":["null","string"],"default":null}]}],"default":null}
]}`

// LoginEvent is LoginEventStream event n at t (Status Success, or Failed
// for every tenth).
func LoginEvent(n int, t time.Time) map[string]any {
	st := "Success"
	if n%10 == 9 {
		st = "Failed"
	}
	ms := t.UnixMilli()
	return map[string]any{"EventDate": ms, "CreatedDate": ms, "CreatedById": "005000000000001",
		"EventIdentifier": fmt.Sprintf("login-%d", n), "EventUuid": fmt.Sprintf("uuid-%d", n), "Username": fmt.Sprintf("user%d@example.com", n%50),
		"UserId": "005000000000001", "SourceIp": "192.0.2.10", "Status": st, "LoginType": "Application", "Browser": "Chrome", "AdditionalInfo": "{}"}
}

// AccountChange is an AccountChangeEvent for account n committed at t,
// with a billing city (a union of null and a record).
func AccountChange(n int, t time.Time) map[string]any {
	return map[string]any{
		"ChangeEventHeader": map[string]any{"entityName": "Account", "recordIds": []any{fmt.Sprintf("001%015d", n)}, "changeType": "UPDATE",
			"changeOrigin": "com/salesforce/api/soap/60.0", "transactionKey": fmt.Sprintf("tx-%d", n), "sequenceNumber": 1,
			"commitTimestamp": t.UnixMilli(), "commitNumber": int64(n), "commitUser": "005000000000001",
			"nulledFields": []any{}, "diffFields": []any{}, "changedFields": []any{"0x6"}},
		"Name":           map[string]any{"string": fmt.Sprintf("Account %d", n)},
		"BillingAddress": map[string]any{"com.sforce.eventbus.Address": map[string]any{"Street": nil, "City": map[string]any{"string": "Paris"}}},
	}
}
