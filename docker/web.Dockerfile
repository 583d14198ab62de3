# syntax=docker/dockerfile:1
# The chat UI: built with Vite from clients/web, served by an unprivileged nginx on :3000.
#   docker build -f docker/web.Dockerfile .
FROM node:20.20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY clients/web ./clients/web
RUN node_modules/.bin/vite build clients/web

FROM nginxinc/nginx-unprivileged:1.27-alpine AS web
# API_URL: Envoy as the browser reaches it; empty means this page's host on port 8080.
ENV API_URL=""
COPY docker/web.nginx.conf.template /etc/nginx/templates/default.conf.template
COPY --from=build /src/clients/web/dist /usr/share/nginx/html
EXPOSE 3000
HEALTHCHECK --interval=5s --timeout=3s --retries=5 CMD ["wget", "-q", "-O", "/dev/null", "http://127.0.0.1:3000/"]
