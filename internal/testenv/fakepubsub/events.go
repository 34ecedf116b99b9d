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
// ChangeEventHeader record, nullable body fields, a compound address, and
// the record's datetimes as Salesforce spells them: plain longs holding
// epoch milliseconds, named by their doc.
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
   {"name":"City","type":["null","string"],"default":null},
   {"name":"State","type":["null","string"],"default":null},
   {"name":"PostalCode","type":["null","string"],"default":null},
   {"name":"Country","type":["null","string"],"default":null}]}],"default":null},
 {"name":"CreatedDate","type":["null","long"],"doc":"CreatedDate:DateTime","default":null},
 {"name":"LastModifiedDate","type":["null","long"],"doc":"LastModifiedDate:DateTime","default":null},
 {"name":"Rating","type":["null","string"],"default":null},
 {"name":"Industry","type":["null","string"],"default":null}
]}`

// AccountChangeEventLogicalSchema is AccountChangeEventSchema with every
// datetime declared with Avro's timestamp-millis logical type (the header's
// commitTimestamp, the body's nullable CreatedDate and LastModifiedDate):
// the same events must read the same whichever way a schema spells them.
const AccountChangeEventLogicalSchema = `{"type":"record","name":"AccountChangeEvent","namespace":"com.sforce.eventbus","fields":[
 {"name":"ChangeEventHeader","type":{"type":"record","name":"ChangeEventHeader","fields":[
   {"name":"entityName","type":"string"},
   {"name":"recordIds","type":{"type":"array","items":"string"}},
   {"name":"changeType","type":{"type":"enum","name":"ChangeType","symbols":["CREATE","UPDATE","DELETE","UNDELETE","GAP_CREATE","GAP_UPDATE","GAP_DELETE","GAP_UNDELETE","GAP_OVERFLOW"]}},
   {"name":"changeOrigin","type":"string"},
   {"name":"transactionKey","type":"string"},
   {"name":"sequenceNumber","type":"int"},
   {"name":"commitTimestamp","type":{"type":"long","logicalType":"timestamp-millis"}},
   {"name":"commitNumber","type":"long"},
   {"name":"commitUser","type":"string"},
   {"name":"nulledFields","type":{"type":"array","items":"string"}},
   {"name":"diffFields","type":{"type":"array","items":"string"}},
   {"name":"changedFields","type":{"type":"array","items":"string"}}]}},
 {"name":"Name","type":["null","string"],"default":null},
 {"name":"BillingAddress","type":["null",{"type":"record","name":"Address","fields":[
   {"name":"Street","type":["null","string"],"default":null},
   {"name":"City","type":["null","string"],"default":null},
   {"name":"State","type":["null","string"],"default":null},
   {"name":"PostalCode","type":["null","string"],"default":null},
   {"name":"Country","type":["null","string"],"default":null}]}],"default":null},
 {"name":"CreatedDate","type":["null",{"type":"long","logicalType":"timestamp-millis"}],"doc":"CreatedDate:DateTime","default":null},
 {"name":"LastModifiedDate","type":["null",{"type":"long","logicalType":"timestamp-millis"}],"doc":"LastModifiedDate:DateTime","default":null},
 {"name":"Rating","type":["null","string"],"default":null},
 {"name":"Industry","type":["null","string"],"default":null}
]}`

// LoginEvent is LoginEventStream event n at t: Status Success, or for
// every tenth a failure as Salesforce words it (Invalid Password, Failed:
// Computer activation required).
func LoginEvent(n int, t time.Time) map[string]any {
	st := "Success"
	switch n % 20 {
	case 9:
		st = "Invalid Password"
	case 19:
		st = "Failed: Computer activation required"
	}
	ms := t.UnixMilli()
	return map[string]any{"EventDate": ms, "CreatedDate": ms, "CreatedById": "005000000000001",
		"EventIdentifier": fmt.Sprintf("login-%d", n), "EventUuid": fmt.Sprintf("uuid-%d", n), "Username": fmt.Sprintf("user%d@example.com", n%50),
		"UserId": "005000000000001", "SourceIp": "192.0.2.10", "Status": st, "LoginType": "Application", "Browser": "Chrome", "AdditionalInfo": "{}"}
}

// AccountChange is an UPDATE AccountChangeEvent for account n committed at
// t, changing its name, its rating, its billing city (a compound field: a
// union of null and a record) and clearing its industry. As over the
// Pub/Sub API, unchanged fields (CreatedDate, the address's other parts)
// are null, and the header names the changed and nulled fields in bitmaps
// over the schema's field positions (Bitmaps): changedFields
// ["0x<Name, LastModifiedDate, Rating, Industry>", "2-0x2" (City)].
func AccountChange(n int, t time.Time) map[string]any {
	ev := accountEvent(n, "UPDATE", t, map[string]any{
		"Name":             map[string]any{"string": fmt.Sprintf("Account %d", n)},
		"BillingAddress":   address(map[string]any{"City": map[string]any{"string": "Paris"}}),
		"LastModifiedDate": t.Truncate(time.Second).UnixMilli(),
		"Rating":           map[string]any{"string": "Hot"},
	})
	h := ev["ChangeEventHeader"].(map[string]any)
	h["changedFields"] = Bitmaps(AccountChangeEventSchema, "Name", "BillingAddress.City", "LastModifiedDate", "Rating", "Industry")
	h["nulledFields"] = Bitmaps(AccountChangeEventSchema, "Industry")
	return ev
}

// AccountGap is a gap AccountChangeEvent of account n committed at t
// (changeType GAP_CREATE, GAP_UPDATE, GAP_DELETE, GAP_UNDELETE or
// GAP_OVERFLOW): Salesforce could not send the change itself, so the body
// has no values and the header names no fields; only the record ids tell
// what to read back from the org.
func AccountGap(n int, changeType string, t time.Time) map[string]any {
	ev := accountEvent(n, changeType, t, nil)
	if changeType == "GAP_OVERFLOW" { // one per entity, naming no record
		ev["ChangeEventHeader"].(map[string]any)["recordIds"] = []any{}
	}
	return ev
}

// AccountDelete is the DELETE AccountChangeEvent of account n: every body
// field is null.
func AccountDelete(n int, t time.Time) map[string]any {
	return accountEvent(n, "DELETE", t, nil)
}

// address is a BillingAddress with every part null but those in parts.
func address(parts map[string]any) map[string]any {
	a := map[string]any{"Street": nil, "City": nil, "State": nil, "PostalCode": nil, "Country": nil}
	for k, v := range parts {
		a[k] = v
	}
	return map[string]any{"com.sforce.eventbus.Address": a}
}

// AccountCreate is the CREATE AccountChangeEvent of account n committed at
// t. The body's CreatedDate is the record's, which Salesforce stores in
// whole seconds; the header's commitTimestamp keeps the milliseconds.
func AccountCreate(n int, t time.Time) map[string]any {
	created := t.Truncate(time.Second).UnixMilli()
	return accountEvent(n, "CREATE", t, map[string]any{
		"Name":        map[string]any{"string": fmt.Sprintf("Account %d", n)},
		"CreatedDate": created, "LastModifiedDate": created,
	})
}

// AccountUndelete is the UNDELETE AccountChangeEvent of account n, restored
// from the recycle bin at commit: the body carries the whole record, with
// the CreatedDate it had when it was first created (weeks or months old).
func AccountUndelete(n int, commit, created time.Time) map[string]any {
	return accountEvent(n, "UNDELETE", commit, map[string]any{
		"Name":        map[string]any{"string": fmt.Sprintf("Account %d", n)},
		"CreatedDate": created.Truncate(time.Second).UnixMilli(), "LastModifiedDate": commit.Truncate(time.Second).UnixMilli(),
	})
}

func accountEvent(n int, changeType string, commit time.Time, body map[string]any) map[string]any {
	rec := map[string]any{
		"ChangeEventHeader": map[string]any{"entityName": "Account", "recordIds": []any{fmt.Sprintf("001%015d", n)}, "changeType": changeType,
			"changeOrigin": "com/salesforce/api/soap/60.0", "transactionKey": fmt.Sprintf("tx-%d", n), "sequenceNumber": 1,
			"commitTimestamp": commit.UnixMilli(), "commitNumber": int64(n), "commitUser": "005000000000001",
			"nulledFields": []any{}, "diffFields": []any{}, "changedFields": []any{}},
		"Name": nil, "BillingAddress": nil, "CreatedDate": nil, "LastModifiedDate": nil, "Rating": nil, "Industry": nil,
	}
	for k, v := range body {
		rec[k] = v
	}
	return rec
}
