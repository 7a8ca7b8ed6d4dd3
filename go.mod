module github.com/gdnjit/gdn

go 1.26.0

require (
	codeberg.org/sbinet/npyio v0.14.0
	github.com/dgraph-io/ristretto/v2 v2.4.2
	golang.org/x/sync v0.25.0
	gonum.org/v1/gonum v0.17.0
	gorgonia.org/cu v0.9.6
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/google/uuid v1.1.1 // indirect
	github.com/nlpodyssey/gopickle v0.3.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	golang.org/x/sys v0.36.0 // indirect
	golang.org/x/text v0.34.0 // indirect
)
