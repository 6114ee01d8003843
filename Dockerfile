# A static tandem binary on a distroless base: the replayer image of
# deploy/kubernetes. Build: docker build -t tandem:latest .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /tandem ./cmd/tandem

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /tandem /usr/local/bin/tandem
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/tandem"]
