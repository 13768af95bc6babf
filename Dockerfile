# requeue: build the TypeScript, then run on a slim Node image.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workers ./workers
# The service's packages are optional peers of the library, bullmq a required one (all devDependencies here):
# made plain dependencies of the image's package.json, so pruning dev keeps them (at the lock's versions).
RUN npm ci --ignore-scripts && npm run build \
 && node -e "const fs=require('fs');const p=require('./package.json');for(const n of ['bullmq','fastify','@fastify/static','@fastify/swagger','fastify-type-provider-zod','preact','htm','uplot']){p.dependencies[n]=p.devDependencies[n];delete p.devDependencies[n];delete p.peerDependencies[n];delete p.peerDependenciesMeta[n]}fs.writeFileSync('package.json',JSON.stringify(p,null,2))" \
 && npm prune --omit=dev --ignore-scripts

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080
CMD ["node", "dist/workers/service/main.js"]
