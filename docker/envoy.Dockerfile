# Envoy with Batchline's configuration baked in, for orchestrators without file mounts
# (deploy/k8s). Compose mounts the same two files into the stock image instead.
FROM envoyproxy/envoy:v1.40.0
WORKDIR /etc
COPY envoy/envoy.yaml envoy/batchline.pb /etc/envoy/
USER 101
EXPOSE 8080
CMD ["envoy", "-c", "/etc/envoy/envoy.yaml"]
