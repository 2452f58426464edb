# syntax=docker/dockerfile:1
# Multi-stage: build with dev dependencies, run with production ones only.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY db ./db
COPY jobs ./jobs
RUN npm run build

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY db/migrations ./db/migrations
COPY db/reporting-role.sql ./db/reporting-role.sql
USER node
EXPOSE 3000
ENTRYPOINT ["node", "bin/cards-sync.js"]
CMD ["worker", "--admin"]
